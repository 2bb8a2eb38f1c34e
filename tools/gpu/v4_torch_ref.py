"""The reference for tools/gpu/v4_bench.sh: transformers' DeepseekV4ForCausalLM (torch eager, bf16,
random weights) at DeepSeek-V4-Flash's dimensions with the same layer count and layer kinds as
Fission's run, on the same GPU in the same invocation.

Prints `RESULT torch_prefill_ms <ms> tokens <n>` (one forward of an n-token prompt, no cache) and
`RESULT torch_decode_ms <ms> batch <b> context <c>` (the median of decode steps with transformers'
cache after a c-token prompt). Timing: CUDA events after warm-ups.

  usage: python3 v4_torch_ref.py LAYERS EXPERTS PREFILL_TOKENS DECODE_BATCH DECODE_CONTEXT
"""
import json
import os
import sys

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))


def flash_config(layers, experts):
    with open(os.path.join(HERE, "../../bench/configs/deepseek-v4-flash/config.json")) as f:
        flash = json.load(f)
    kinds = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    ratios = flash["compress_ratios"][:layers]
    kw = {k: flash[k] for k in ("vocab_size", "hidden_size", "moe_intermediate_size", "num_attention_heads",
                                "num_key_value_heads", "num_experts_per_tok", "q_lora_rank", "qk_rope_head_dim",
                                "head_dim", "sliding_window", "o_lora_rank", "o_groups", "index_n_heads",
                                "index_head_dim", "index_topk", "hc_mult", "hc_eps", "hc_sinkhorn_iters",
                                "swiglu_limit", "routed_scaling_factor", "rms_norm_eps", "compress_rope_theta",
                                "rope_theta")}
    kw.update(num_hidden_layers=layers, n_routed_experts=experts, n_shared_experts=1, num_nextn_predict_layers=0,
              layer_types=[kinds[r] for r in ratios],
              mlp_layer_types=["hash_moe" if i < flash["num_hash_layers"] else "moe" for i in range(layers)],
              compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
              partial_rotary_factor=flash["qk_rope_head_dim"] / flash["head_dim"], max_position_embeddings=65536,
              tie_word_embeddings=False)
    y = flash["rope_scaling"]
    compress = dict(rope_type="yarn", rope_theta=flash["compress_rope_theta"], factor=y["factor"],
                    original_max_position_embeddings=y["original_max_position_embeddings"], beta_fast=y["beta_fast"],
                    beta_slow=y["beta_slow"], partial_rotary_factor=kw["partial_rotary_factor"], attention_factor=1.0)
    main = dict(rope_type="default", rope_theta=flash["rope_theta"], partial_rotary_factor=kw["partial_rotary_factor"])
    cfg = transformers.DeepseekV4Config(**kw, rope_parameters={"main": main, "compress": compress})
    cfg._attn_implementation = "eager"
    return cfg


def time_ms(fn, warmup=1, reps=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def main():
    layers, experts, prefill, batch, context = map(int, sys.argv[1:6])
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = transformers.DeepseekV4ForCausalLM(flash_config(layers, experts)).eval()
    for p in model.parameters():  # small values keep the random network's activations finite
        p.data.uniform_(-0.02, 0.02)
    vocab = model.config.vocab_size
    with torch.no_grad():
        ids = torch.randint(3, vocab, (1, prefill), device="cuda")
        ms = time_ms(lambda: model(input_ids=ids, use_cache=False))
        print(f"RESULT torch_prefill_ms {ms:.3f} tokens {prefill}", flush=True)
        ids = torch.randint(3, vocab, (batch, context), device="cuda")
        out = model(input_ids=ids, use_cache=True)
        cache = out.past_key_values
        step = torch.randint(3, vocab, (batch, 1), device="cuda")
        steps = []
        for _ in range(8):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            out = model(input_ids=step, past_key_values=cache, use_cache=True)
            b.record()
            b.synchronize()
            steps.append(a.elapsed_time(b))
            cache = out.past_key_values
        ms = sorted(steps[2:])[len(steps[2:]) // 2]
        print(f"RESULT torch_decode_ms {ms:.3f} batch {batch} context {context}", flush=True)


if __name__ == "__main__":
    main()
