#!/usr/bin/env python3
"""Builds the tiny DeepSeek Sparse Attention checkpoints (deepseek_v32, glm_moe_dsa) and their
reference outputs with transformers, as make_model_goldens.py does for DeepSeek-V3.

index_topk is small (32) so that prompts of a few hundred tokens are truly sparse: most queries
see far more keys than they select. The indexer has 16 heads, so that a key whose every head's
ReLU is zero (an exact score tie at 0) is rare. The top-k boundary must not be a near tie either:
for every query with more visible keys than index_topk the script records the gap between the
k-th and (k+1)-th index score, and tries the next seed when the smallest gap (relative to the
largest visible score) is below MIN_RELATIVE_GAP, about ten times the rounding of a 16-head fp32
score, so that rounding cannot change a selection.

The GLM model uses an IndexShare pattern (GLM-5.2's "full"/"shared" layers) when this
transformers version supports indexer_types; golden.json says whether it did.

usage: make_dsa_goldens.py --out tests/fixtures/models
"""
import argparse
import inspect
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_model_goldens import YARN, canonical_state_dict, common, greedy, load_canonical_into  # noqa: E402

GREEDY_STEPS = 32
PROMPT_LENGTHS = (1, 19, 120, 260)
MIN_RELATIVE_GAP = 2e-6
INDEX = dict(index_n_heads=16, index_head_dim=32, index_topk=32)

MODELS = {
    # DeepSeek-V3.2 shape: YaRN, group-limited routing, dense first layer.
    "tiny-deepseek-v32": dict(
        family="deepseek_v32",
        config=common(max_position_embeddings=512, **INDEX),
        rope=YARN),
    # GLM-5 shape: one routing group, eps 1e-5, default rope, and IndexShare.
    "tiny-glm-dsa": dict(
        family="glm_moe_dsa",
        config=common(max_position_embeddings=512, num_hidden_layers=4, n_group=1, topk_group=1,
                      rms_norm_eps=1e-5, n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2,
                      routed_scaling_factor=1.8, indexer_types=["full", "shared", "full", "shared"],
                      **INDEX),
        rope=dict(rope_type="default", rope_theta=10000.0)),
}


def classes(family):
    if family == "deepseek_v32":
        return transformers.DeepseekV32Config, transformers.DeepseekV32ForCausalLM
    return transformers.GlmMoeDsaConfig, transformers.GlmMoeDsaForCausalLM


def make_config(spec):
    config_cls, _ = classes(spec["family"])
    kw = dict(spec["config"])
    kw.pop("rope_interleave", None)  # the DSA families fix their own rope layouts
    cfg = config_cls(**kw, rope_parameters=dict(spec["rope"]))
    cfg._attn_implementation = "eager"
    return cfg


def redraw_weights(model, seed):
    """Every parameter re-drawn so that activations stay O(1); LayerNorm biases small."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif p.ndim == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * (torch.rand(b.shape, generator=g) - 0.5))


class IndexGaps:
    """Watches every indexer forward and records the smallest relative gap at the top-k cutoff."""

    def __init__(self, topk):
        self.topk = topk
        self.min_gap = float("inf")
        self.code = set()

    def watch(self, model):
        for m in model.modules():
            if type(m).__name__.endswith("Indexer"):
                self.code.add(inspect.unwrap(type(m).forward).__code__)

    def __call__(self, frame, event, arg):
        if event != "return" or frame.f_code not in self.code:
            return
        scores = frame.f_locals.get("index_scores")
        if scores is None:
            return
        s = scores.reshape(-1, scores.shape[-1]).float()
        finite = torch.isfinite(s) & (s > -1e30)
        for row, ok in zip(s, finite):
            vals = row[ok]
            if vals.numel() <= self.topk:
                continue
            top = vals.topk(self.topk + 1).values
            scale = max(float(vals.abs().max()), 1e-6)
            self.min_gap = min(self.min_gap, float(top[self.topk - 1] - top[self.topk]) / scale)


def drop_saved_weights(model_dir):
    saved = {}
    for f in sorted(os.listdir(model_dir)):
        if f.endswith(".safetensors"):
            saved.update(load_file(os.path.join(model_dir, f)))
            os.remove(os.path.join(model_dir, f))
        elif f.endswith(".index.json"):
            os.remove(os.path.join(model_dir, f))
    return saved


def build(name, spec, out_dir, seed):
    torch.manual_seed(seed)
    config = make_config(spec)
    _, model_cls = classes(spec["family"])
    model = model_cls(config).float().eval()
    redraw_weights(model, seed)
    model_dir = os.path.join(out_dir, name)
    shutil.rmtree(model_dir, ignore_errors=True)
    model.save_pretrained(model_dir, safe_serialization=True)
    canonical = canonical_state_dict(drop_saved_weights(model_dir), config)
    for k, v in model.state_dict().items():
        if k.endswith("e_score_correction_bias"):
            canonical[k] = v.float().contiguous()
    load_canonical_into(model, canonical)
    save_file(canonical, os.path.join(model_dir, "model.safetensors"), metadata={"format": "pt"})

    gaps = IndexGaps(config.index_topk)
    gaps.watch(model)
    g = torch.Generator().manual_seed(seed + 1)
    golden, summary = {}, {"prompts": []}
    for i, n in enumerate(PROMPT_LENGTHS):
        prompt = torch.randint(2, config.vocab_size, (n,), generator=g).tolist()
        ids = greedy(model, prompt, GREEDY_STEPS)
        sys.setprofile(gaps)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        sys.setprofile(None)
        top2 = logits[n - 1:-1].topk(2, dim=-1).values
        golden[f"prompt{i}.ids"] = torch.tensor(ids, dtype=torch.int64)
        golden[f"prompt{i}.prompt_len"] = torch.tensor([n], dtype=torch.int64)
        golden[f"prompt{i}.logits"] = logits.contiguous()
        summary["prompts"].append({"prompt_len": n, "total_len": len(ids),
                                   "min_greedy_margin": float((top2[:, 0] - top2[:, 1]).min())})
    save_file(golden, os.path.join(model_dir, "golden.safetensors"))
    attn = [layer.self_attn for layer in model.model.layers]
    summary.update({
        "model": name, "seed": seed, "torch": torch.__version__, "transformers": transformers.__version__,
        "greedy_steps": GREEDY_STEPS, "attn_implementation": "eager", "dtype": "float32",
        "index_topk": config.index_topk, "min_relative_topk_gap": gaps.min_gap,
        "indexer_types": list(getattr(config, "indexer_types", None) or []),
        "index_share_supported": all(hasattr(a, "skip_topk") for a in attn) if spec["family"] == "glm_moe_dsa" else None,
        "parameters": sum(p.numel() for p in model.parameters())})
    json.dump(summary, open(os.path.join(model_dir, "golden.json"), "w"), indent=2, sort_keys=True)
    return summary


def dump_sources(out_dir):
    """The exact reference math this run used, for whoever reads the fixtures."""
    with open(os.path.join(out_dir, "dsa_reference_source.txt"), "w") as f:
        for family in ("deepseek_v32", "glm_moe_dsa"):
            _, model_cls = classes(family)
            mod = sys.modules[model_cls.__module__]
            for cls_name in dir(mod):
                if cls_name.endswith(("Indexer", "Attention", "Model")) or "rotary" in cls_name.lower():
                    obj = getattr(mod, cls_name)
                    if inspect.isclass(obj) and obj.__module__ == mod.__name__:
                        f.write(f"##### {family}.{cls_name}\n{inspect.getsource(obj)}\n")
            for fn in ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave", "yarn_apply_mscale"):
                if hasattr(mod, fn):
                    f.write(f"##### {family}.{fn}\n{inspect.getsource(getattr(mod, fn))}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None)
    ap.add_argument("--sources", default=None, help="folder for the reference source dump")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    if args.sources:
        dump_sources(args.sources)
    for base_seed, (name, spec) in enumerate(MODELS.items(), start=4321):
        if args.only and name != args.only:
            continue
        for attempt in range(8):
            summary = build(name, spec, args.out, base_seed + 100 * attempt)
            print(json.dumps(summary), flush=True)
            if summary["min_relative_topk_gap"] >= MIN_RELATIVE_GAP:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
