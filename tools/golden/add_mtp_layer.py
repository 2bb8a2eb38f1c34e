#!/usr/bin/env python3
"""Adds a NextN (MTP) draft layer to the tiny DeepSeek-V3 fixture, in both checkpoint layouts.

Plain Python 3 (no torch, no numpy): safetensors are written by hand (an 8-byte little-endian
header length, the JSON header, then the raw little-endian bytes).

Writes, from fixed seeds (the same bytes on every run):
  tests/fixtures/models/tiny-deepseek-v3/model-mtp.safetensors
      the target checkpoint's extra layer, `model.layers.{num_hidden_layers}.*`, as published
      DeepSeek-V3 checkpoints carry it (without the copies of embed_tokens and shared_head.head,
      which the draft takes from the target);
  tests/fixtures/models/tiny-deepseek-v3-nextn/
      the same weights in the layout of SGLang's NextN export (DeepSeek-R1-NextN):
      `nextn_layer_parameters.safetensors` with the layer renamed `model.layers.0.*`, and the
      target's config.json with num_hidden_layers 1 and architectures DeepseekV3ForCausalLMNextN.

The layer is random (an MTP head is trained, and this one is not): eh_proj, the decoder layer
(MLA attention and DeepSeekMoE, as the NextN layer of DeepSeek-V3 always is) and the norms. Values
are stored as bf16 to keep the fixture small.

Usage: python3 tools/golden/add_mtp_layer.py [REPO_ROOT]
"""

import json
import math
import os
import random
import struct
import sys

SEED = 2311


def bf16_bytes(values):
    """Round-to-nearest-even fp32 -> bf16, little-endian."""
    out = bytearray()
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        bits += 0x7FFF + ((bits >> 16) & 1)
        out += struct.pack("<H", (bits >> 16) & 0xFFFF)
    return bytes(out)


def write_safetensors(path, tensors):
    """tensors: list of (name, shape, values) in fp32; stored as bf16 in name order."""
    header = {}
    data = bytearray()
    for name, shape, values in sorted(tensors, key=lambda t: t[0]):
        assert len(values) == math.prod(shape), name
        raw = bf16_bytes(values)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)


def mtp_tensors(config, layer):
    rng = random.Random(SEED)
    h = config["hidden_size"]
    heads = config["num_attention_heads"]
    qk = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    kv_rank = config["kv_lora_rank"]
    q_rank = config["q_lora_rank"]
    rope = config["qk_rope_head_dim"]
    v = config["v_head_dim"]
    experts = config["n_routed_experts"]
    inter = config["moe_intermediate_size"]
    shared = config["n_shared_experts"] * inter

    def matrix(rows, cols, scale=1.0):
        std = scale / math.sqrt(cols)
        return [rng.gauss(0.0, std) for _ in range(rows * cols)]

    def norm(n):
        return [1.0 + rng.gauss(0.0, 0.1) for _ in range(n)]

    p = f"model.layers.{layer}."
    out = [
        (p + "enorm.weight", [h], norm(h)),
        (p + "hnorm.weight", [h], norm(h)),
        (p + "eh_proj.weight", [h, 2 * h], matrix(h, 2 * h)),
        (p + "shared_head.norm.weight", [h], norm(h)),
        (p + "input_layernorm.weight", [h], norm(h)),
        (p + "post_attention_layernorm.weight", [h], norm(h)),
        (p + "self_attn.q_a_proj.weight", [q_rank, h], matrix(q_rank, h)),
        (p + "self_attn.q_a_layernorm.weight", [q_rank], norm(q_rank)),
        (p + "self_attn.q_b_proj.weight", [heads * qk, q_rank], matrix(heads * qk, q_rank)),
        (p + "self_attn.kv_a_proj_with_mqa.weight", [kv_rank + rope, h], matrix(kv_rank + rope, h)),
        (p + "self_attn.kv_a_layernorm.weight", [kv_rank], norm(kv_rank)),
        (p + "self_attn.kv_b_proj.weight", [heads * (config["qk_nope_head_dim"] + v), kv_rank],
         matrix(heads * (config["qk_nope_head_dim"] + v), kv_rank)),
        (p + "self_attn.o_proj.weight", [h, heads * v], matrix(h, heads * v)),
        (p + "mlp.gate.weight", [experts, h], matrix(experts, h)),
        (p + "mlp.gate.e_score_correction_bias", [experts], [rng.gauss(0.0, 0.02) for _ in range(experts)]),
        (p + "mlp.shared_experts.gate_proj.weight", [shared, h], matrix(shared, h)),
        (p + "mlp.shared_experts.up_proj.weight", [shared, h], matrix(shared, h)),
        (p + "mlp.shared_experts.down_proj.weight", [h, shared], matrix(h, shared)),
    ]
    for e in range(experts):
        q = f"{p}mlp.experts.{e}."
        out.append((q + "gate_proj.weight", [inter, h], matrix(inter, h)))
        out.append((q + "up_proj.weight", [inter, h], matrix(inter, h)))
        out.append((q + "down_proj.weight", [h, inter], matrix(h, inter)))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    models = os.path.join(root, "tests", "fixtures", "models")
    target = os.path.join(models, "tiny-deepseek-v3")
    with open(os.path.join(target, "config.json")) as f:
        config = json.load(f)
    layers = config["num_hidden_layers"]
    assert config.get("num_nextn_predict_layers", 0) == 1, "the target config must declare one NextN layer"

    write_safetensors(os.path.join(target, "model-mtp.safetensors"), mtp_tensors(config, layers))

    nextn = os.path.join(models, "tiny-deepseek-v3-nextn")
    os.makedirs(nextn, exist_ok=True)
    write_safetensors(os.path.join(nextn, "nextn_layer_parameters.safetensors"), mtp_tensors(config, 0))
    nextn_config = dict(config)
    nextn_config["num_hidden_layers"] = 1
    nextn_config["architectures"] = ["DeepseekV3ForCausalLMNextN"]
    with open(os.path.join(nextn, "config.json"), "w") as f:
        json.dump(nextn_config, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
