#!/usr/bin/env python3
"""Builds the tiny DeepSeek-V4 checkpoint and its reference outputs with transformers.

Like make_model_goldens.py: a small random DeepseekV4ForCausalLM (fp32, eager) from a fixed seed,
every parameter re-drawn so that activations stay O(1) and every mechanism is exercised (non-zero
attention sinks, compressor position biases, mHC bases, a score-correction bias, random hash
tables), greedy continuation by full recomputation, then one forward over prompt + continuation
whose logits at every position go to golden.safetensors.

The model covers every V4 layer kind: sliding-window only (0), CSA (compress rate 4, overlapping
windows, its own lightning indexer) and HCA (here rate 16 instead of 128, so that short prompts
close several windows); layer 0 is hash-routed. sliding_window 8 and index_topk 4 make prompts of a
few dozen tokens cross the window ring and make the indexer's selection real (16 index heads keep
exact ties at a zero score rare). swiglu_limit 1.0 makes the SwiGLU clamps bite.

The checkpoint is written in the layout of DeepSeek's published V4 checkpoints (`embed`, `head`,
`layers.N.attn.*`, `layers.N.ffn.experts.E.w1/w2/w3`, `hc_attn_fn`, ...), renamed from transformers'
module names by RENAMES below; config.json is what transformers saves. When this transformers
version can load that layout back (it converts DeepSeek's names on load), the script checks that
the reloaded model gives the same logits; golden.json says whether it could.

As for the DSA fixtures, the indexer's top-k must not sit on a near tie: the smallest relative gap
between the k-th and (k+1)-th index score is recorded and the next seed tried when it is too small.

usage: make_v4_goldens.py --out tests/fixtures/models [--sources DIR]
"""
import argparse
import inspect
import json
import os
import re
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_dsa_goldens import IndexGaps  # noqa: E402  (the same top-k gap watcher)

GREEDY_STEPS = 32
PROMPT_LENGTHS = (1, 7, 37, 100)
MIN_RELATIVE_GAP = 2e-6
NAME = "tiny-deepseek-v4"

CONFIG = dict(
    vocab_size=512,
    hidden_size=64,
    moe_intermediate_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=1,
    head_dim=32,
    q_lora_rank=32,
    partial_rotary_factor=0.25,  # 8 rope dims
    num_experts_per_tok=2,
    n_routed_experts=8,
    n_shared_experts=1,
    scoring_func="sqrtsoftplus",
    norm_topk_prob=True,
    routed_scaling_factor=1.5,
    max_position_embeddings=4096,
    rope_theta=10000.0,
    layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                 "compressed_sparse_attention"],
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
    compress_rope_theta=160000.0,
    hc_mult=4,
    hc_sinkhorn_iters=20,
    hc_eps=1e-6,
    mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
    swiglu_limit=1.0,
    sliding_window=8,
    o_groups=2,
    o_lora_rank=16,
    index_n_heads=16,  # many heads: an entry whose every ReLU is zero (a tie at 0) is rare
    index_head_dim=16,
    index_topk=4,
    num_nextn_predict_layers=0,
    rms_norm_eps=1e-6,
    bos_token_id=0,
    eos_token_id=1,
    tie_word_embeddings=False,
)
# The compressed layers' rope: YaRN over a short original context, so that it matters here.
COMPRESS_ROPE = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=32, beta_fast=32.0, beta_slow=1.0)

# transformers module names -> DeepSeek's checkpoint names (regex, replacement), first match wins.
RENAMES = [
    (r"^model\.embed_tokens\.weight$", "embed.weight"),
    (r"^lm_head\.weight$", "head.weight"),
    (r"^model\.norm\.weight$", "norm.weight"),
    (r"^model\.hc_head\.hc_(fn|base|scale)$", r"hc_head_\1"),
    (r"^model\.layers\.(\d+)\.input_layernorm\.", r"layers.\1.attn_norm."),
    (r"^model\.layers\.(\d+)\.post_attention_layernorm\.", r"layers.\1.ffn_norm."),
    (r"^model\.layers\.(\d+)\.attn_hc\.(fn|base|scale)$", r"layers.\1.hc_attn_\2"),
    (r"^model\.layers\.(\d+)\.ffn_hc\.(fn|base|scale)$", r"layers.\1.hc_ffn_\2"),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.indexer\.kv_proj\.", r"layers.\1.attn.indexer.compressor.wkv."),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.indexer\.gate_proj\.", r"layers.\1.attn.indexer.compressor.wgate."),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.indexer\.position_bias$", r"layers.\1.attn.indexer.compressor.ape"),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.indexer\.kv_norm\.", r"layers.\1.attn.indexer.compressor.norm."),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.indexer\.q_b_proj\.", r"layers.\1.attn.indexer.wq_b."),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.indexer\.scorer\.weights_proj\.", r"layers.\1.attn.indexer.weights_proj."),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.kv_proj\.", r"layers.\1.attn.compressor.wkv."),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.gate_proj\.", r"layers.\1.attn.compressor.wgate."),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.position_bias$", r"layers.\1.attn.compressor.ape"),
    (r"^model\.layers\.(\d+)\.self_attn\.compressor\.kv_norm\.", r"layers.\1.attn.compressor.norm."),
    (r"^model\.layers\.(\d+)\.self_attn\.q_a_proj\.", r"layers.\1.attn.wq_a."),
    (r"^model\.layers\.(\d+)\.self_attn\.q_a_norm\.", r"layers.\1.attn.q_norm."),
    (r"^model\.layers\.(\d+)\.self_attn\.q_b_proj\.", r"layers.\1.attn.wq_b."),
    (r"^model\.layers\.(\d+)\.self_attn\.kv_proj\.", r"layers.\1.attn.wkv."),
    (r"^model\.layers\.(\d+)\.self_attn\.kv_norm\.", r"layers.\1.attn.kv_norm."),
    (r"^model\.layers\.(\d+)\.self_attn\.o_a_proj\.", r"layers.\1.attn.wo_a."),
    (r"^model\.layers\.(\d+)\.self_attn\.o_b_proj\.", r"layers.\1.attn.wo_b."),
    (r"^model\.layers\.(\d+)\.self_attn\.sinks$", r"layers.\1.attn.attn_sink"),
    (r"^model\.layers\.(\d+)\.mlp\.gate\.e_score_correction_bias$", r"layers.\1.ffn.gate.bias"),
    (r"^model\.layers\.(\d+)\.mlp\.gate\.(weight|tid2eid)$", r"layers.\1.ffn.gate.\2"),
    (r"^model\.layers\.(\d+)\.mlp\.shared_experts\.gate_proj\.", r"layers.\1.ffn.shared_experts.w1."),
    (r"^model\.layers\.(\d+)\.mlp\.shared_experts\.up_proj\.", r"layers.\1.ffn.shared_experts.w3."),
    (r"^model\.layers\.(\d+)\.mlp\.shared_experts\.down_proj\.", r"layers.\1.ffn.shared_experts.w2."),
]


def make_config():
    kw = dict(CONFIG)
    compress = dict(COMPRESS_ROPE, rope_theta=kw["compress_rope_theta"], partial_rotary_factor=kw["partial_rotary_factor"],
                    attention_factor=1.0)
    main = dict(rope_type="default", rope_theta=kw["rope_theta"], partial_rotary_factor=kw["partial_rotary_factor"])
    cfg = transformers.DeepseekV4Config(**kw, rope_parameters={"main": main, "compress": compress})
    cfg._attn_implementation = "eager"
    return cfg


def redraw_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("position_bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif name.endswith(("sinks", ".base", "hc_base")):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif p.ndim == 1:  # norms and the mHC scales
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * (torch.rand(b.shape, generator=g) - 0.5))
            elif name.endswith("tid2eid"):
                experts = model.config.n_routed_experts
                b.copy_(torch.rand(b.shape[0], experts, generator=g).argsort(dim=-1)[:, : b.shape[1]])


def deepseek_layout(sd):
    """transformers' state dict in DeepSeek's checkpoint names, experts split per expert."""
    out = {}
    for k, v in sd.items():
        m = re.match(r"^model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$", k)
        if m:
            layer, kind = m.group(1), m.group(2)
            for e in range(v.shape[0]):
                base = f"layers.{layer}.ffn.experts.{e}."
                if kind == "gate_up_proj":
                    inter = v.shape[1] // 2
                    out[base + "w1.weight"] = v[e, :inter].contiguous()
                    out[base + "w3.weight"] = v[e, inter:].contiguous()
                else:
                    out[base + "w2.weight"] = v[e].contiguous()
            continue
        for pattern, repl in RENAMES:
            if re.match(pattern, k):
                out[re.sub(pattern, repl, k)] = v.contiguous()
                break
        else:
            raise SystemExit(f"no DeepSeek name for transformers tensor {k}")
    return out


@torch.no_grad()
def greedy(model, prompt, steps):
    ids = list(prompt)
    for _ in range(steps):
        logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1]
        ids.append(int(torch.argmax(logits)))
    return ids


@torch.no_grad()
def cached_drift(model, ids, prompt_len):
    """transformers' own cached decode against its full forward (informational)."""
    try:
        full = model(torch.tensor([ids]), use_cache=False).logits[0]
        out = model(torch.tensor([ids[:prompt_len]]), use_cache=True)
        cache, rows = out.past_key_values, [out.logits[0, -1]]
        for t in range(prompt_len, len(ids) - 1):
            out = model(torch.tensor([[ids[t]]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            rows.append(out.logits[0, -1])
        inc = torch.stack(rows)
        ref = full[prompt_len - 1:len(ids) - 1]
        return float(((inc - ref).norm(dim=-1) / ref.norm(dim=-1)).max())
    except Exception as e:  # noqa: BLE001 - a record, not a check
        return f"{type(e).__name__}: {e}"


@torch.no_grad()
def reload_check(model_dir, golden, ids):
    """Whether transformers loads the DeepSeek-named checkpoint back to the same logits."""
    try:
        again = transformers.DeepseekV4ForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
        again.config._attn_implementation = "eager"
        logits = again(torch.tensor([ids]), use_cache=False).logits[0]
        return float((logits - golden).abs().max())
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def build(out_dir, seed):
    torch.manual_seed(seed)
    config = make_config()
    model = transformers.DeepseekV4ForCausalLM(config).float().eval()
    redraw_weights(model, seed)
    model_dir = os.path.join(out_dir, NAME)
    shutil.rmtree(model_dir, ignore_errors=True)
    model.save_pretrained(model_dir, safe_serialization=True)
    saved_keys = []
    for f in sorted(os.listdir(model_dir)):
        if f.endswith(".safetensors"):
            saved_keys += sorted(load_file(os.path.join(model_dir, f)).keys())
            os.remove(os.path.join(model_dir, f))
        elif f.endswith(".index.json"):
            os.remove(os.path.join(model_dir, f))
    sd = {k: v.float() if v.is_floating_point() else v.to(torch.int64) for k, v in model.state_dict().items()}
    save_file(deepseek_layout(sd), os.path.join(model_dir, "model.safetensors"), metadata={"format": "pt"})

    gaps = IndexGaps(config.index_topk)
    gaps.watch(model)
    g = torch.Generator().manual_seed(seed + 1)
    golden, summary = {}, {"prompts": []}
    reload = None
    for i, n in enumerate(PROMPT_LENGTHS):
        prompt = torch.randint(2, config.vocab_size, (n,), generator=g).tolist()
        ids = greedy(model, prompt, GREEDY_STEPS)
        sys.setprofile(gaps)
        with torch.no_grad():
            logits = model(torch.tensor([ids]), use_cache=False).logits[0].float()
        sys.setprofile(None)
        top2 = logits[n - 1:-1].topk(2, dim=-1).values
        golden[f"prompt{i}.ids"] = torch.tensor(ids, dtype=torch.int64)
        golden[f"prompt{i}.prompt_len"] = torch.tensor([n], dtype=torch.int64)
        golden[f"prompt{i}.logits"] = logits.contiguous()
        summary["prompts"].append({"prompt_len": n, "total_len": len(ids),
                                   "min_greedy_margin": float((top2[:, 0] - top2[:, 1]).min()),
                                   "transformers_cached_decode_max_rel_l2": cached_drift(model, ids, n)})
        if i == len(PROMPT_LENGTHS) - 1:
            reload = reload_check(model_dir, logits, ids)
    save_file(golden, os.path.join(model_dir, "golden.safetensors"))
    summary.update({
        "model": NAME, "seed": seed, "torch": torch.__version__, "transformers": transformers.__version__,
        "greedy_steps": GREEDY_STEPS, "attn_implementation": "eager", "dtype": "float32",
        "index_topk": config.index_topk, "min_relative_topk_gap": gaps.min_gap,
        "deepseek_layout_reload_max_abs_diff": reload,
        "transformers_saved_keys": saved_keys,
        "parameters": sum(p.numel() for p in model.parameters())})
    json.dump(summary, open(os.path.join(model_dir, "golden.json"), "w"), indent=2, sort_keys=True)
    return summary


def dump_sources(out_dir):
    """The exact reference math this run used, for whoever reads the fixtures."""
    mod = sys.modules[transformers.DeepseekV4ForCausalLM.__module__]
    with open(os.path.join(out_dir, "v4_reference_source.txt"), "w") as f:
        f.write(inspect.getsource(mod))
        f.write("\n##### configuration\n")
        f.write(inspect.getsource(sys.modules[transformers.DeepseekV4Config.__module__]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--sources", default=None, help="folder for the reference source dump")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    if args.sources:
        dump_sources(args.sources)
    for attempt in range(8):
        summary = build(args.out, 9100 + 100 * attempt)
        brief = {k: v for k, v in summary.items() if k != "transformers_saved_keys"}
        print(json.dumps(brief), flush=True)
        if summary["min_relative_topk_gap"] >= MIN_RELATIVE_GAP:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
