#!/usr/bin/env python3
"""Builds the tiny DeepSeek-V3-family checkpoints and their reference outputs with transformers.

Runs on a host with torch, transformers (5.x) and safetensors; downloads nothing. For each model it
  1. builds a small random DeepseekV3ForCausalLM from a fixed seed (weights re-drawn with scales
     that give peaked, non-degenerate logits, and a non-zero e_score_correction_bias so that the
     bias-for-selection-only rule is exercised),
  2. saves it with save_pretrained (safetensors), rewriting expert tensors into the per-expert
     names real DeepSeek checkpoints use if this transformers version saved them fused,
  3. runs fixed prompts in fp32 with eager attention: greedy continuation for N steps by full
     recomputation, then one forward over prompt + continuation, and records every position's
     logits in golden.safetensors plus a summary in golden.json.
The FP8 model stores its linear weights as e4m3 with 128x128 block scales (weight_scale_inv, as
DeepSeek's FP8 checkpoints do); its reference is transformers run on the dequantized weights.

usage: make_model_goldens.py --out tests/fixtures/models
"""
import argparse
import json
import math
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

GREEDY_STEPS = 32
PROMPT_LENGTHS = (1, 6, 19, 40)


def common(**overrides):
    cfg = dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        n_shared_experts=2,
        n_routed_experts=16,
        num_experts_per_tok=4,
        n_group=4,
        topk_group=2,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
        first_k_dense_replace=1,
        q_lora_rank=48,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=16,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        rope_interleave=True,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=None,
        initializer_range=0.02,
        attention_bias=False,
    )
    cfg.update(overrides)
    return cfg


YARN = dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=64,
            beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)

MODELS = {
    # (a) DeepSeek-V3 shape: dense first layer then MoE, group-limited routing, YaRN, q LoRA.
    "tiny-deepseek-v3": dict(config=common(), rope=YARN, fp8=False),
    # (c) GLM-style routing: one group, eps 1e-5; also covers q_proj without LoRA and
    #     non-interleaved rope.
    "tiny-glm-routing": dict(
        config=common(n_group=1, topk_group=1, rms_norm_eps=1e-5, q_lora_rank=None,
                      n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2,
                      routed_scaling_factor=1.8, rope_interleave=False),
        rope=dict(rope_type="default", rope_theta=10000.0), fp8=False),
    # (b) FP8 block-quantized, dims multiples of 128 (kv_a_proj's 192 rows end in a partial block,
    #     as DeepSeek-V3's 576 do).
    "tiny-deepseek-v3-fp8": dict(
        config=common(hidden_size=256, intermediate_size=256, moe_intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                      n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2, n_group=2,
                      topk_group=1, q_lora_rank=128, kv_lora_rank=128, qk_nope_head_dim=64,
                      qk_rope_head_dim=64, v_head_dim=64),
        rope=YARN, fp8=True),
}


def make_config(spec):
    kw = dict(spec["config"])
    rope = dict(spec["rope"])
    try:
        cfg = DeepseekV3Config(**kw, rope_parameters=rope)
    except TypeError:  # transformers 4.x
        theta = rope.pop("rope_theta")
        scaling = None if rope.get("rope_type") == "default" else {**rope, "type": rope["rope_type"]}
        cfg = DeepseekV3Config(**kw, rope_theta=theta, rope_scaling=scaling)
    cfg._attn_implementation = "eager"
    return cfg


def redraw_weights(model, seed):
    """Re-draws every parameter so that activations stay O(1) through the layers."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:  # norms
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * (torch.rand(b.shape, generator=g) - 0.5))


def canonical_state_dict(sd, config):
    """Per-expert tensor names, as published DeepSeek checkpoints have them."""
    out = {}
    for k, v in sd.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            prefix = k[: -len("gate_up_proj")]
            inter = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{prefix}{e}.gate_proj.weight"] = v[e, :inter].contiguous()
                out[f"{prefix}{e}.up_proj.weight"] = v[e, inter:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            prefix = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{prefix}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            out[k] = v.contiguous()
    return out


def is_fp8_linear(name):
    if not name.endswith(".weight") or "layernorm" in name or name.endswith("norm.weight"):
        return False
    if "embed_tokens" in name or name.startswith("lm_head") or name.endswith("mlp.gate.weight"):
        return False
    return ".self_attn." in name or ".mlp." in name


def quantize_block_fp8(w, block=128):
    """e4m3 weights with one fp32 scale per 128x128 block: w ~= q * scale_inv."""
    rows, cols = w.shape
    br, bc = math.ceil(rows / block), math.ceil(cols / block)
    scale_inv = torch.empty(br, bc, dtype=torch.float32)
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(br):
        for j in range(bc):
            tile = w[i * block:(i + 1) * block, j * block:(j + 1) * block].float()
            s = tile.abs().max().clamp(min=1e-12) / 448.0
            scale_inv[i, j] = s
            q[i * block:(i + 1) * block, j * block:(j + 1) * block] = (tile / s).to(torch.float8_e4m3fn)
    return q, scale_inv


def dequantize_block_fp8(q, scale_inv, block=128):
    w = q.float()
    rows, cols = w.shape
    for i in range(scale_inv.shape[0]):
        for j in range(scale_inv.shape[1]):
            w[i * block:(i + 1) * block, j * block:(j + 1) * block] *= scale_inv[i, j]
    return w


def load_canonical_into(model, canonical):
    """Loads per-expert tensors back into whatever layout this transformers version uses."""
    target = model.state_dict()
    new = {}
    for k in target:
        if k.endswith("mlp.experts.gate_up_proj"):
            prefix = k[: -len("gate_up_proj")]
            n = target[k].shape[0]
            new[k] = torch.stack([torch.cat([canonical[f"{prefix}{e}.gate_proj.weight"],
                                             canonical[f"{prefix}{e}.up_proj.weight"]]) for e in range(n)])
        elif k.endswith("mlp.experts.down_proj"):
            prefix = k[: -len("down_proj")]
            n = target[k].shape[0]
            new[k] = torch.stack([canonical[f"{prefix}{e}.down_proj.weight"] for e in range(n)])
        else:
            new[k] = canonical[k]
    model.load_state_dict(new, strict=True)


@torch.no_grad()
def greedy(model, prompt, steps):
    ids = list(prompt)
    for _ in range(steps):
        logits = model(torch.tensor([ids])).logits[0, -1]
        ids.append(int(torch.argmax(logits)))
    return ids


def build(name, spec, out_dir, seed):
    torch.manual_seed(seed)
    config = make_config(spec)
    model = DeepseekV3ForCausalLM(config).float().eval()
    redraw_weights(model, seed)
    model_dir = os.path.join(out_dir, name)
    shutil.rmtree(model_dir, ignore_errors=True)
    model.save_pretrained(model_dir, safe_serialization=True)
    saved = {}
    for f in sorted(os.listdir(model_dir)):
        if f.endswith(".safetensors"):
            saved.update(load_file(os.path.join(model_dir, f)))
            os.remove(os.path.join(model_dir, f))
    for f in os.listdir(model_dir):
        if f.endswith(".index.json"):
            os.remove(os.path.join(model_dir, f))
    saved_fused = any(k.endswith("experts.gate_up_proj") for k in saved)
    canonical = canonical_state_dict(saved, config)
    # e_score_correction_bias is a buffer; make sure it is in the checkpoint like in DeepSeek's.
    for k, v in model.state_dict().items():
        if k.endswith("e_score_correction_bias"):
            canonical[k] = v.float().contiguous()

    if spec["fp8"]:
        stored, reference = {}, {}
        for k, v in canonical.items():
            if is_fp8_linear(k) and v.ndim == 2:
                q, s = quantize_block_fp8(v)
                stored[k] = q
                stored[k + "_scale_inv"] = s
                reference[k] = dequantize_block_fp8(q, s)
            elif k.endswith("e_score_correction_bias"):
                stored[k] = v.float()
                reference[k] = v.float()
            else:
                stored[k] = v.to(torch.bfloat16)
                reference[k] = stored[k].float()
        load_canonical_into(model, reference)
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [128, 128]}
        cfg["torch_dtype"] = "bfloat16"
        json.dump(cfg, open(os.path.join(model_dir, "config.json"), "w"), indent=2, sort_keys=True)
    else:
        stored = canonical
        load_canonical_into(model, canonical)
    save_file(stored, os.path.join(model_dir, "model.safetensors"), metadata={"format": "pt"})

    g = torch.Generator().manual_seed(seed + 1)
    golden, summary = {}, {"prompts": [], "saved_fused_experts": saved_fused}
    rot = model.model.rotary_emb
    golden["rope.inv_freq"] = rot.inv_freq.float().contiguous()
    golden["rope.attention_scaling"] = torch.tensor([float(rot.attention_scaling)])
    golden["attention.softmax_scale"] = torch.tensor([float(model.model.layers[0].self_attn.scaling)])
    for i, n in enumerate(PROMPT_LENGTHS):
        prompt = torch.randint(2, config.vocab_size, (n,), generator=g).tolist()
        ids = greedy(model, prompt, GREEDY_STEPS)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        top2 = logits[n - 1:-1].topk(2, dim=-1).values
        margin = float((top2[:, 0] - top2[:, 1]).min())
        golden[f"prompt{i}.ids"] = torch.tensor(ids, dtype=torch.int64)
        golden[f"prompt{i}.prompt_len"] = torch.tensor([n], dtype=torch.int64)
        golden[f"prompt{i}.logits"] = logits.contiguous()
        summary["prompts"].append({"prompt_len": n, "total_len": len(ids), "min_greedy_margin": margin})
    save_file(golden, os.path.join(model_dir, "golden.safetensors"))
    summary.update({"model": name, "seed": seed, "torch": torch.__version__,
                    "transformers": transformers.__version__, "greedy_steps": GREEDY_STEPS,
                    "attn_implementation": "eager", "dtype": "float32",
                    "parameters": sum(p.numel() for p in model.parameters())})
    json.dump(summary, open(os.path.join(model_dir, "golden.json"), "w"), indent=2, sort_keys=True)
    print(json.dumps(summary))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    for seed, (name, spec) in enumerate(MODELS.items(), start=1234):
        if args.only and name != args.only:
            continue
        build(name, spec, args.out, seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
