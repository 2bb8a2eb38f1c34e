#!/usr/bin/env python3
"""Byte roofline of one decode step of a DeepSeek-V3-family model on one GPU.

A decode step must read every weight it uses once and every cached latent row of every sequence
once; at HBM bandwidth B that takes (weight bytes + KV bytes) / B. For a batch of one the weights
are the active ones: attention, the dense MLPs, per MoE layer the router, the shared experts and
top_k routed experts, and the lm_head row block (all of it: every vocabulary row is needed for the
logits). For a batch of b sequences the routed experts read are the expected number of distinct
experts among b * top_k uniform draws. Norms, biases and the embedding row are ignored (< 0.1%).

Speculative decoding (--verify-tokens T = S + 1, --draft-steps S): the target step is a verify
run of T tokens a sequence (the experts of b * T * top_k draws, the cache read once), and each of
the S draft steps reads the NextN layer (one MoE decoder layer, eh_proj in bf16) over the batch,
its own latent cache and the whole lm_head again. With every draft accepted a step emits T tokens
a sequence, so the time per token is the step's over T.

With --kv-cache-dtype fp8_e4m3 a latent row is FlashMLA's FP8 entry (kv_lora_rank e4m3 codes, an
fp32 scale per 128 of them, the rope part in bf16) instead of bf16.

  usage: roofline.py CONFIG_DIR [--override JSON] [--weights fp8|bf16] [--context N] [--batch B]
         [--verify-tokens T --draft-steps S] [--kv-cache-dtype auto|fp8_e4m3] [--bandwidth GBPS]
Prints one JSON object: bytes per step, the roofline step time and time per token in ms.
"""
import argparse
import json
import os


def merge(base, patch):
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


def roofline(c, weights, context, batch, bandwidth_gbps, verify_tokens=1, draft_steps=0, kv_dtype="auto"):
    w = 1.0 if weights == "fp8" else 2.0  # bytes per quantized matrix element
    h, heads = c["hidden_size"], c["num_attention_heads"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    q_lora, kv_lora = c.get("q_lora_rank") or 0, c["kv_lora_rank"]
    q = (q_lora * h + heads * (nope + rope) * q_lora) if q_lora else heads * (nope + rope) * h
    attention = q + (kv_lora + rope) * h + heads * (nope + v) * kv_lora + h * heads * v
    layers = c["num_hidden_layers"]
    dense_layers = min(layers, c.get("first_k_dense_replace", 0))
    moe_layers = layers - dense_layers
    experts, top_k = c["n_routed_experts"], c["num_experts_per_tok"]
    expert = 3 * h * c["moe_intermediate_size"]

    def moe(tokens):  # one MoE layer's expert bytes (elements) for `tokens` rows
        distinct = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
        return c.get("n_shared_experts", 0) * expert + distinct * expert

    lm_head = c["vocab_size"] * h * 2.0  # bf16 (not quantized in the checkpoints)
    router = experts * h * 2.0  # bf16
    weight_bytes = w * (layers * attention + dense_layers * 3 * h * c["intermediate_size"] +
                        moe_layers * moe(batch * verify_tokens))
    weight_bytes += moe_layers * router + lm_head
    # One cached latent row: bf16, or the FP8 entry.
    row = kv_lora + 4 * -(-kv_lora // 128) + 2.0 * rope if kv_dtype == "fp8_e4m3" else (kv_lora + rope) * 2.0
    kv_bytes = batch * layers * context * row
    # Each draft step: the NextN layer (attention, MoE, eh_proj) and its cache, then the lm_head.
    draft_bytes = draft_steps * (w * (attention + moe(batch)) + router + 2 * h * h * 2.0 + lm_head +
                                 batch * context * row)
    total = weight_bytes + kv_bytes + draft_bytes
    step_ms = total / (bandwidth_gbps * 1e9) * 1e3
    return {
        "weights": weights, "batch": batch, "context": context, "layers": layers,
        "verify_tokens": verify_tokens, "draft_steps": draft_steps, "kv_cache_dtype": kv_dtype,
        "weight_bytes": int(weight_bytes), "kv_bytes": int(kv_bytes), "draft_bytes": int(draft_bytes),
        "step_ms": step_ms, "token_ms": step_ms / verify_tokens, "bandwidth_gbps": bandwidth_gbps,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config_dir")
    p.add_argument("--override", default="{}")
    p.add_argument("--weights", choices=["fp8", "bf16"], default="fp8")
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--verify-tokens", type=int, default=1, help="tokens a sequence per target step (S + 1)")
    p.add_argument("--draft-steps", type=int, default=0, help="draft layer steps per target step (S)")
    p.add_argument("--kv-cache-dtype", choices=["auto", "bf16", "fp8_e4m3"], default="auto")
    p.add_argument("--bandwidth", type=float, default=4200.0, help="GB/s")
    a = p.parse_args()
    with open(os.path.join(a.config_dir, "config.json")) as f:
        config = merge(json.load(f), json.loads(a.override))
    print(json.dumps(roofline(config, a.weights, a.context, a.batch, a.bandwidth, a.verify_tokens, a.draft_steps,
                              a.kv_cache_dtype)))


if __name__ == "__main__":
    main()
