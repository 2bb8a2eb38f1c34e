#!/usr/bin/env python3
"""FLOP model of one DeepSeek Sparse Attention prefill: a single prompt of N tokens through L
layers of a DeepSeek-V3.2 / GLM-5 config, and the time it takes at the given ceilings.

Per layer and token (t = the token's position, so a query sees t + 1 keys):
  projections   2 x the layer's active weights: q_a, q_b, kv_a, o_proj, the indexer's wq_b, wk and
                weights_proj, and the feed-forward (dense MLP, or shared + top-k routed experts);
                the MLA prefill runs absorbed (W_UK folded into q, W_UV after attention), so kv_b
                counts once per token as two GEMMs of heads x (nope + v) x kv_lora
  indexer       2 x index_n_heads x index_head_dim x (t + 1)      (FP8 tensor cores)
  sparse MLA    2 x heads x min(t + 1, index_topk) x (2 kv_lora + rope)   (bf16 tensor cores)
The top-k selection and everything elementwise are memory-bound and not counted (the benchmark
reports the selection's share separately). Times use one ceiling per kind: FP8 GEMMs and the
indexer at --fp8-tflops, sparse MLA at --bf16-tflops.

  usage: dsa_flops.py CONFIG_DIR --tokens N [--layers L] [--override JSON] [--fp8-tflops 1300]
         [--bf16-tflops 790]
Prints one JSON object.
"""
import argparse
import json
import os


def layer_weights(c, moe):
    h, heads = c["hidden_size"], c["num_attention_heads"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    q_lora, kv_lora = c["q_lora_rank"], c["kv_lora_rank"]
    attention = q_lora * h + heads * (nope + rope) * q_lora + (kv_lora + rope) * h + h * heads * v
    attention += heads * (nope + v) * kv_lora  # absorbed: W_UK into q, W_UV after attention
    ih, idim = c["index_n_heads"], c["index_head_dim"]
    indexer = ih * idim * q_lora + idim * h + ih * h
    if moe:
        expert = 3 * h * c["moe_intermediate_size"]
        ffn = (c.get("n_shared_experts", 0) + c["num_experts_per_tok"]) * expert + c["n_routed_experts"] * h
    else:
        ffn = 3 * h * c["intermediate_size"]
    return attention + indexer + ffn


def model(c, tokens, layers, fp8_tflops, bf16_tflops):
    dense = min(layers, c.get("first_k_dense_replace", 0))
    weights = sum(layer_weights(c, moe=i >= dense) for i in range(layers))
    projections = 2.0 * tokens * weights
    visible_sum = tokens * (tokens + 1) / 2.0  # sum over queries of t + 1
    topk = c["index_topk"]
    # Queries past top-k attend exactly top-k keys; earlier ones attend all they see.
    sparse_keys = sum(min(t + 1, topk) for t in range(min(tokens, topk))) + max(0, tokens - topk) * topk
    indexer = layers * 2.0 * c["index_n_heads"] * c["index_head_dim"] * visible_sum
    sparse_mla = layers * 2.0 * c["num_attention_heads"] * (2 * c["kv_lora_rank"] + c["qk_rope_head_dim"]) * sparse_keys
    t_proj = projections / (fp8_tflops * 1e12)
    t_index = indexer / (fp8_tflops * 1e12)
    t_mla = sparse_mla / (bf16_tflops * 1e12)
    return {
        "tokens": tokens, "layers": layers,
        "tflop": {"projections": projections / 1e12, "indexer": indexer / 1e12, "sparse_mla": sparse_mla / 1e12},
        "indexer_mflop_per_token_per_layer": indexer / layers / tokens / 1e6,
        "ms": {"projections": t_proj * 1e3, "indexer": t_index * 1e3, "sparse_mla": t_mla * 1e3,
               "total": (t_proj + t_index + t_mla) * 1e3},
        "ceilings_tflops": {"fp8": fp8_tflops, "bf16": bf16_tflops},
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config_dir")
    p.add_argument("--tokens", type=int, required=True)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--override", default="{}")
    p.add_argument("--fp8-tflops", type=float, default=1300.0)
    p.add_argument("--bf16-tflops", type=float, default=790.0)
    a = p.parse_args()
    c = json.load(open(os.path.join(a.config_dir, "config.json")))
    c.update(json.loads(a.override))
    layers = a.layers or c["num_hidden_layers"]
    print(json.dumps(model(c, a.tokens, layers, a.fp8_tflops, a.bf16_tflops)))


if __name__ == "__main__":
    main()
