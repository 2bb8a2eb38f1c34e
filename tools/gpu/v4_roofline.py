#!/usr/bin/env python3
"""Byte roofline of one decode step of a DeepSeek-V4 model on one GPU, and (--prefill N) the FLOP
model of one N-token prompt's prefill.

A decode step reads every weight it uses once and every cached key it attends to once; at HBM
bandwidth B that takes (weight bytes + cache bytes) / B. Per layer the weights are: attention
(wq_a, wq_b, wkv, the grouped wo_a, wo_b), the compressor of a CSA or HCA layer (wkv and wgate,
2·head_dim wide for CSA's overlapping windows), a CSA layer's indexer (wq_b, weights_proj and
its own compressor), the two sublayers' mHC mixing weights (fp32), the router (fp32), the shared
expert and, for b sequences, the expected number of distinct routed experts among b·top_k
uniform draws (hash-routed layers draw as uniformly). The cache a query reads: its window
(min(context, sliding_window) keys), the CSA entries it selects (min(context/4, index_topk)) and
the indexer keys it scores (context/4), or the HCA entries (context/128). Plus the lm_head. Norms,
biases, ape and the embedding row are ignored (< 0.1%).

Prefill (one prompt of N tokens, token t seeing t + 1 positions), per layer and token:
  projections  2 x the weights a token multiplies: attention (wq_a, wq_b, wkv, the grouped wo_a,
               wo_b), the compressor's wkv and wgate (CSA 2·head_dim wide, HCA head_dim), a CSA
               layer's indexer (wq_b, weights_proj, its compressor), the router, the mHC mixing of
               both sublayers, the shared expert and top_k routed experts
  attention    4 x heads x head_dim x keys: the window (min(t + 1, sliding_window)) plus the CSA
               entries selected (min((t + 1) / 4, index_topk)) or the HCA entries ((t + 1) / 128)
  indexer      2 x index_n_heads x index_head_dim x (t + 1) / 4 (CSA layers)
plus the lm_head for the last token. Everything elementwise (norms, rope, the compressors' pooling,
top-k) is memory-bound and not counted. The time is the FLOPs at one tensor-core ceiling
(--tflops, bf16 by default: the measured dense mma ceiling of an H200).

  usage: v4_roofline.py CONFIG_DIR [--override JSON] [--weights fp8|bf16] [--experts same|fp4] [--context N]
         [--batch B] [--kv-cache-dtype auto|bf16|fp8_e4m3] [--bandwidth GBPS] [--prefill N [--tflops T]]
--experts fp4: the routed experts at 4.25 bits a weight (e2m1 and a ue8m0 scale per 32), the rest
as --weights says.
Prints one JSON object: bytes per step and the roofline step time in ms, or with --prefill the
prefill's TFLOP by kind and its time in ms.
"""
import argparse
import json
import os

from roofline import merge


def layer_kinds(c):
    ratios = c.get("compress_ratios")
    layers = c["num_hidden_layers"]
    if ratios is not None:
        return [int(r) for r in ratios[:layers]]
    kinds = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
    rates = c.get("compress_rates", {})
    return [rates.get(t, kinds[t]) if t != "sliding_attention" else 0 for t in c["layer_types"][:layers]]


def roofline(c, weights, context, batch, bandwidth_gbps, kv_dtype="auto", experts_format="same"):
    w = 1.0 if weights == "fp8" else 2.0
    routed_w = 4.25 / 8 if experts_format == "fp4" else w
    h, heads, d = c["hidden_size"], c["num_attention_heads"], c["head_dim"]
    rope, q_lora = c["qk_rope_head_dim"], c["q_lora_rank"]
    groups, o_lora = c["o_groups"], c["o_lora_rank"]
    idx_heads, idx_dim, topk = c["index_n_heads"], c["index_head_dim"], c["index_topk"]
    window = c["sliding_window"]
    mult = c.get("hc_mult", 4)
    experts, top_k, inter = c["n_routed_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"]
    attention = q_lora * h + heads * d * q_lora + d * h + groups * o_lora * (heads * d // groups) + h * groups * o_lora
    expert = 3 * h * inter
    distinct = experts * (1.0 - (1.0 - top_k / experts) ** batch)
    key = (d - rope) + -(-(d - rope) // 64) + 2 * rope if kv_dtype == "fp8_e4m3" else d * (2 if kv_dtype == "bf16" else 4)
    index_key = idx_dim + 4 if kv_dtype == "fp8_e4m3" else idx_dim * 4
    weight_bytes = kv_bytes = 0.0
    for ratio in layer_kinds(c):
        matrices = attention + expert  # the routed experts are counted apart (their format)
        cache = min(context, window) * key
        if ratio == 4:
            matrices += 2 * (2 * d) * h + idx_heads * idx_dim * q_lora + 2 * (2 * idx_dim) * h
            weight_bytes += idx_heads * h * 2.0  # weights_proj, bf16
            cache += min(context // 4, topk) * key + (context // 4) * index_key
        elif ratio > 0:
            matrices += 2 * d * h
            cache += (context // ratio) * key
        weight_bytes += w * matrices + routed_w * distinct * expert + 4.0 * (experts * h + 2 * (2 + mult) * mult * mult * h)
        kv_bytes += batch * cache
    weight_bytes += 4.0 * mult * mult * h + c["vocab_size"] * h * 2.0  # the head's mixing, lm_head (bf16)
    total = weight_bytes + kv_bytes
    step_ms = total / (bandwidth_gbps * 1e9) * 1e3
    return {"weights": weights, "experts": experts_format, "batch": batch, "context": context, "layers": c["num_hidden_layers"],
            "kv_cache_dtype": kv_dtype, "weight_bytes": int(weight_bytes), "kv_bytes": int(kv_bytes),
            "step_ms": step_ms, "bandwidth_gbps": bandwidth_gbps}


def prefill_flops(c, tokens, tflops):
    h, heads, d = c["hidden_size"], c["num_attention_heads"], c["head_dim"]
    q_lora, groups, o_lora = c["q_lora_rank"], c["o_groups"], c["o_lora_rank"]
    idx_heads, idx_dim, topk = c["index_n_heads"], c["index_head_dim"], c["index_topk"]
    window, mult = c["sliding_window"], c.get("hc_mult", 4)
    experts, top_k, inter = c["n_routed_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"]
    shared = c.get("n_shared_experts", 1)
    attention = q_lora * h + heads * d * q_lora + d * h + groups * o_lora * (heads * d // groups) + h * groups * o_lora
    ffn = (shared + top_k) * 3 * h * inter + experts * h + 2 * (2 + mult) * mult * mult * h
    n = tokens
    window_keys = sum(min(t + 1, window) for t in range(n))
    total = {"projections": 0.0, "attention": 0.0, "indexer": 0.0}
    for ratio in layer_kinds(c):
        matrices = attention + ffn
        keys = window_keys
        if ratio == 4:
            matrices += 2 * (2 * d) * h + idx_heads * idx_dim * q_lora + idx_heads * h + 2 * (2 * idx_dim) * h
            keys += sum(min((t + 1) // 4, topk) for t in range(n))
            total["indexer"] += 2.0 * idx_heads * idx_dim * sum((t + 1) // 4 for t in range(n))
        elif ratio > 0:
            matrices += 2 * d * h
            keys += sum((t + 1) // ratio for t in range(n))
        total["projections"] += 2.0 * matrices * n
        total["attention"] += 4.0 * heads * d * keys
    total["projections"] += 2.0 * c["vocab_size"] * h  # the last token's logits
    flops = sum(total.values())
    return {"prefill_tokens": n, "layers": c["num_hidden_layers"], **{k + "_tflop": v / 1e12 for k, v in total.items()},
            "tflop": flops / 1e12, "tflops_ceiling": tflops, "prefill_ms": flops / (tflops * 1e12) * 1e3}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config_dir")
    p.add_argument("--override", default="{}")
    p.add_argument("--weights", choices=["fp8", "bf16"], default="bf16")
    p.add_argument("--experts", choices=["same", "fp4"], default="same")
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--kv-cache-dtype", choices=["auto", "bf16", "fp8_e4m3"], default="bf16")
    p.add_argument("--bandwidth", type=float, default=4200.0, help="GB/s")
    p.add_argument("--prefill", type=int, default=0, help="tokens of one prompt: the prefill's FLOP model")
    p.add_argument("--tflops", type=float, default=790.0, help="the tensor-core ceiling of --prefill")
    a = p.parse_args()
    with open(os.path.join(a.config_dir, "config.json")) as f:
        config = merge(json.load(f), json.loads(a.override))
    if a.prefill > 0:
        print(json.dumps(prefill_flops(config, a.prefill, a.tflops)))
        return
    print(json.dumps(roofline(config, a.weights, a.context, a.batch, a.bandwidth, a.kv_cache_dtype, a.experts)))


if __name__ == "__main__":
    main()
