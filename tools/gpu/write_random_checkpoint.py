#!/usr/bin/env python3
"""Writes a bf16 DeepSeek-V3-architecture checkpoint of a config's real size with arbitrary (not
trained) weights, for measuring how fast Fission loads real safetensors files (tools/gpu/load_bench.sh).

    usage: write_random_checkpoint.py CONFIG_DIR OUT_DIR [--layers N] [--fp8]

The tensors have the names and shapes of the Hugging Face DeepSeek-V3 layout (per-expert routed
weights, one shard per layer plus an index). --fp8 writes DeepSeek-V3's published format instead:
every attention and MLP matrix as e4m3 codes with fp32 128x128 block scales (`weight_scale_inv`)
and a quantization_config; embeddings, lm_head, routers and norms stay bf16. Values are a fixed block of small bf16 numbers tiled
over every tensor: no Python-side randomness per byte, so 15 GB write in seconds. Pure standard
library (the hosts have no numpy).
"""
import argparse
import json
import os
import random
import struct

PATTERN_VALUES = 1 << 15  # a 64 KiB block of bf16 values, tiled


def bf16_pattern():
    r = random.Random(5)
    out = bytearray()
    for _ in range(PATTERN_VALUES):
        f = struct.pack("<f", r.uniform(-0.02, 0.02))
        out += f[2:4]  # the high half of an fp32 is its bf16 truncation
    return bytes(out)


def layer_tensors(c, i):
    h, heads = c["hidden_size"], c["num_attention_heads"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    q_lora, kv_lora = c["q_lora_rank"], c["kv_lora_rank"]
    p = f"model.layers.{i}."
    t = {
        p + "input_layernorm.weight": [h],
        p + "post_attention_layernorm.weight": [h],
        p + "self_attn.q_a_proj.weight": [q_lora, h],
        p + "self_attn.q_a_layernorm.weight": [q_lora],
        p + "self_attn.q_b_proj.weight": [heads * (nope + rope), q_lora],
        p + "self_attn.kv_a_proj_with_mqa.weight": [kv_lora + rope, h],
        p + "self_attn.kv_a_layernorm.weight": [kv_lora],
        p + "self_attn.kv_b_proj.weight": [heads * (nope + v), kv_lora],
        p + "self_attn.o_proj.weight": [h, heads * v],
    }
    if i < c.get("first_k_dense_replace", 0):
        inter = c["intermediate_size"]
        t.update({p + "mlp.gate_proj.weight": [inter, h], p + "mlp.up_proj.weight": [inter, h],
                  p + "mlp.down_proj.weight": [h, inter]})
        return t
    e, inter = c["n_routed_experts"], c["moe_intermediate_size"]
    shared = inter * c.get("n_shared_experts", 0)
    t[p + "mlp.gate.weight"] = [e, h]
    t[p + "mlp.gate.e_score_correction_bias"] = [e]
    for j in range(e):
        q = f"{p}mlp.experts.{j}."
        t.update({q + "gate_proj.weight": [inter, h], q + "up_proj.weight": [inter, h],
                  q + "down_proj.weight": [h, inter]})
    if shared:
        q = p + "mlp.shared_experts."
        t.update({q + "gate_proj.weight": [shared, h], q + "up_proj.weight": [shared, h],
                  q + "down_proj.weight": [h, shared]})
    return t


def fp8_pattern():
    r = random.Random(7)
    codes = bytearray(r.randrange(256) for _ in range(1 << 16))
    for i, c in enumerate(codes):
        if c & 0x7F == 0x7F:  # e4m3's NaN codes
            codes[i] = c ^ 1
    return bytes(codes) * 16


def quantize_fp8(tensors):
    """Matrices of attention and MLPs -> (F8_E4M3 codes, F32 block scales); the rest stays BF16."""
    out = {}
    for name, shape in tensors.items():
        quantized = len(shape) == 2 and ("self_attn." in name or "mlp." in name) and ".gate.weight" not in name
        if not quantized:
            out[name] = ("BF16", shape)
            continue
        out[name] = ("F8_E4M3", shape)
        out[name + "_scale_inv"] = ("F32", [(shape[0] + 127) // 128, (shape[1] + 127) // 128])
    return out


def write_shard(path, tensors, patterns):
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = {"BF16": 2, "F8_E4M3": 1, "F32": 4}[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name, (dtype, shape) in tensors.items():
            begin, end = header[name]["data_offsets"]
            left, pattern = end - begin, patterns[dtype]
            while left > 0:
                chunk = pattern[: min(left, len(pattern))]
                f.write(chunk)
                left -= len(chunk)
    return offset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--fp8", action="store_true")
    a = ap.parse_args()
    with open(os.path.join(a.config_dir, "config.json")) as f:
        c = json.load(f)
    if a.layers is not None:
        c["num_hidden_layers"] = a.layers
    c["num_nextn_predict_layers"] = 0
    c.pop("quantization_config", None)
    if a.fp8:
        c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                    "weight_block_size": [128, 128]}
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    patterns = {"BF16": bf16_pattern() * 16, "F8_E4M3": fp8_pattern(),  # 1 MiB writes
                "F32": struct.pack("<f", 1e-3) * (1 << 18)}
    shards = [{"model.embed_tokens.weight": [c["vocab_size"], c["hidden_size"]]}]
    shards += [layer_tensors(c, i) for i in range(c["num_hidden_layers"])]
    shards.append({"model.norm.weight": [c["hidden_size"]], "lm_head.weight": [c["vocab_size"], c["hidden_size"]]})
    weight_map, total = {}, 0
    for s, tensors in enumerate(shards):
        name = f"model-{s + 1:05d}-of-{len(shards):05d}.safetensors"
        typed = quantize_fp8(tensors) if a.fp8 else {t: ("BF16", shape) for t, shape in tensors.items()}
        total += write_shard(os.path.join(a.out_dir, name), typed, patterns)
        tensors = typed
        weight_map.update({t: name for t in tensors})
    with open(os.path.join(a.out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    print(f"wrote {total / 1e9:.2f} GB in {len(shards)} shards to {a.out_dir}")


if __name__ == "__main__":
    main()
