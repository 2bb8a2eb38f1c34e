#!/usr/bin/env python3
"""Writes a tiny MXFP4 checkpoint in Quark's layout, and its bf16 twin, from tiny-deepseek-v3.

Plain Python 3 (no torch, numpy or safetensors package): deterministic, byte for byte.

The checkpoint follows amd/DeepSeek-R1-0528-MXFP4 (AMD Quark's export): every Linear outside the
exclude list (attention, the MoE router, lm_head: "*self_attn*", "*mlp.gate.*", "*lm_head" on the
model card) is stored as
  <module>.weight        U8 [rows, cols / 2]  two e2m1 codes a byte, the even column in the low nibble
  <module>.weight_scale  U8 [rows, cols / 32] e8m0 scales (2^(code - 127)) per 32 columns of a row
with scales by the OCP MX rule X = 2^(floor(log2(amax)) - 2) and codes round-to-nearest-even of
value / X, saturating at 6. Everything else is bf16 (round to nearest even), as the published
checkpoint keeps it. config.json gains Quark's quantization_config (w_mxfp4_a_mxfp4: static fp4
weights, dynamic fp4 activations, per_group of 32, e8m0 scales) with the exclude list spelled out.

To stay small it keeps the first two decoder layers (one dense, one MoE) and the first 256 rows of
the vocabulary.

The twin (bf16-twin/) holds the same model with every MXFP4 weight decoded here (e2m1 value times
its scale: exact in bf16) and the other tensors' bf16 bytes unchanged, and no quantization_config.
tests/model/mxfp4_checkpoint_test.cc loads both and requires the same weights and logits.

usage: make_mxfp4_fixture.py [--src tests/fixtures/models/tiny-deepseek-v3]
                             [--out tests/fixtures/models/tiny-deepseek-v3-mxfp4]
"""
import argparse
import array
import fnmatch
import json
import math
import os
import shutil
import struct

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
EMAX_E2M1 = 2
GROUP = 32
EXCLUDE_PATTERNS = ["*self_attn*", "*mlp.gate.*", "*lm_head"]
LAYERS = 2
VOCAB = 256


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(data[begin:end])
        tensors[name] = (info["shape"], list(values))
    return tensors


def write_safetensors(path, tensors):
    """tensors: name -> (dtype, shape, bytes), written in name order."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        dtype, shape, blob = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def bf16_bits(value):
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def bf16_bytes(values):
    return struct.pack(f"<{len(values)}H", *[bf16_bits(v) for v in values])


def nearest_e2m1(x):
    """The e2m1 code of x: nearest value, ties to the even code, saturating at +-6; the sign bit
    is x's (so a small negative value becomes -0, as tensor/dtype.cc's conversion does)."""
    a = abs(x)
    best = 0
    for code in range(1, 8):
        d, b = abs(E2M1[code] - a), abs(E2M1[best] - a)
        if d < b or (d == b and code % 2 == 0):
            best = code
    return best | (8 if math.copysign(1.0, x) < 0 else 0)


def mx_scale_code(amax):
    if amax == 0:
        return 0
    _, exponent = math.frexp(amax)  # amax = m * 2^exponent, m in [0.5, 1)
    shared = max(-127, min(127, exponent - 1 - EMAX_E2M1))
    return shared + 127


def quantize_mxfp4(shape, values):
    rows, cols = shape
    assert cols % 2 == 0, "Quark's layout packs whole bytes per row"
    groups = (cols + GROUP - 1) // GROUP
    codes, scales = [], []
    for r in range(rows):
        row = values[r * cols:(r + 1) * cols]
        for g in range(groups):
            block = row[g * GROUP:(g + 1) * GROUP]
            code = mx_scale_code(max(abs(v) for v in block))
            scales.append(code)
            codes.extend(nearest_e2m1(math.ldexp(v, 127 - code)) for v in block)
    packed = bytes(codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2))
    return packed, bytes(scales)


def dequantize_mxfp4(shape, packed, scales):
    rows, cols = shape
    groups = (cols + GROUP - 1) // GROUP
    out = []
    for i in range(rows * cols):
        nibble = packed[i // 2] & 0xF if i % 2 == 0 else packed[i // 2] >> 4
        value = -E2M1[nibble & 7] if nibble & 8 else E2M1[nibble & 7]
        scale = math.ldexp(1.0, scales[(i // cols) * groups + (i % cols) // GROUP] - 127)
        out.append(value * scale)
    return out


def excluded(module):
    return any(fnmatch.fnmatchcase(module, p) for p in EXCLUDE_PATTERNS)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", default="tests/fixtures/models/tiny-deepseek-v3")
    parser.add_argument("--out", default="tests/fixtures/models/tiny-deepseek-v3-mxfp4")
    args = parser.parse_args()
    tensors = {}
    for name, (shape, values) in read_safetensors(os.path.join(args.src, "model.safetensors")).items():
        if name.startswith("model.layers.") and int(name.split(".")[2]) >= LAYERS:
            continue
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            shape, values = [VOCAB, shape[1]], values[: VOCAB * shape[1]]
        tensors[name] = (shape, values)
    quantized, twin, exclude = {}, {}, []
    for name, (shape, values) in sorted(tensors.items()):
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        # The router (mlp.gate) is not a Linear in the reference model, so Quark never quantizes it.
        linear = (module is not None and len(shape) == 2 and "embed_tokens" not in name and "kv_b_proj" not in name
                  and not module.endswith(".mlp.gate"))
        if linear and excluded(module):
            exclude.append(module)
        if linear and not excluded(module):
            packed, scales = quantize_mxfp4(shape, values)
            quantized[name] = ("U8", [shape[0], shape[1] // 2], packed)
            quantized[name + "_scale"] = ("U8", [shape[0], (shape[1] + GROUP - 1) // GROUP], scales)
            twin[name] = ("BF16", shape, bf16_bytes(dequantize_mxfp4(shape, packed, scales)))
        else:
            quantized[name] = twin[name] = ("BF16", shape, bf16_bytes(values))
    # kv_b_proj is excluded on the model card too ("*self_attn*"); list it with the others.
    exclude = sorted(set(exclude) | {n[: -len(".weight")] for n in tensors if "kv_b_proj" in n})

    with open(os.path.join(args.src, "config.json")) as f:
        config = json.load(f)
    config["dtype"] = "bfloat16"
    config["num_hidden_layers"] = LAYERS
    config["vocab_size"] = VOCAB
    twin_dir = os.path.join(args.out, "bf16-twin")
    os.makedirs(twin_dir, exist_ok=True)
    for directory, tensors_out, quant in ((args.out, quantized, True), (twin_dir, twin, False)):
        write_safetensors(os.path.join(directory, "model.safetensors"), tensors_out)
        c = dict(config)
        if quant:
            spec = {"dtype": "fp4", "qscheme": "per_group", "group_size": GROUP, "ch_axis": -1,
                    "scale_format": "e8m0", "scale_calculation_mode": "even", "round_method": "half_even",
                    "observer_cls": "PerBlockMXObserver", "is_scale_quant": False, "symmetric": None}
            c["quantization_config"] = {
                "quant_method": "quark",
                "quant_mode": "eager_mode",
                "version": "0.10",
                "global_quant_config": {"weight": dict(spec, is_dynamic=False),
                                        "input_tensors": dict(spec, is_dynamic=True),
                                        "output_tensors": None, "bias": None, "target_device": None},
                "layer_quant_config": {},
                "layer_type_quant_config": {},
                "exclude": exclude,
                "export": {"kv_cache_group": [], "pack_method": "reorder", "weight_format": "real_quantized"},
            }
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
            f.write("\n")
        shutil.copy(os.path.join(args.src, "generation_config.json"), directory)


if __name__ == "__main__":
    main()
