#!/usr/bin/env python3
"""Records torch's outputs for every case of the operation table (testing/op_cases.h).

Runs on a host with torch and safetensors; downloads nothing. Each case's inputs are drawn here
from a fixed seed, its outputs computed with torch on the CPU in fp32 (fp64 where the CPU
reference accumulates in double), and both saved to one safetensors file as
"<case>/in/<name>" and "<case>/out/<name>", the names and dtypes the C++ cases read.
tests/kernels/op_table_test.cc runs the CPU reference on these inputs and compares.

The semantics written here are the ones the Backend interface documents (src/kernels/backend.h,
src/kernels/mla_ops.h, src/kernels/dsa_ops.h, src/kernels/sampling.h), written again independently in
torch. It needs
torch alone (1.13 or later): e4m3 rounding and the safetensors file are written here, so neither
float8 dtypes nor the safetensors package are required.

usage: make_op_goldens.py --out tests/fixtures/ops/op_goldens.safetensors
"""
import argparse
import json
import math
import struct

import torch

E4M3_MAX = 448.0
MASK64 = (1 << 64) - 1

gen = torch.Generator().manual_seed(20261201)


def uniform(shape, lo=-1.0, hi=1.0):
    return torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo


def randint(lo, hi, shape):
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int32)


def _e4m3_value(code):
    exponent, mantissa = code >> 3, code & 7
    return mantissa / 8 * 2.0 ** -6 if exponent == 0 else (1 + mantissa / 8) * 2.0 ** (exponent - 7)


E4M3_VALUES = torch.tensor([_e4m3_value(c) for c in range(0x7F)], dtype=torch.float64)  # 0x7F is NaN


class E4M3:
    """e4m3fn codes (uint8): rounded to nearest, ties to the even code, saturated at 448."""

    def __init__(self, codes):
        self.codes = codes

    @staticmethod
    def round(x):
        a = x.double().abs().clamp(max=E4M3_MAX).flatten()
        hi = torch.bucketize(a, E4M3_VALUES).clamp(max=0x7E)
        lo = (hi - 1).clamp(min=0)
        below, above = a - E4M3_VALUES[lo], E4M3_VALUES[hi] - a
        code = torch.where((above < below) | ((above == below) & (hi % 2 == 0)), hi, lo)
        sign = (x.flatten() < 0).long() << 7
        return E4M3((code | sign).to(torch.uint8).view(x.shape))

    def float(self):
        c = self.codes.long()
        magnitude = E4M3_VALUES[c & 0x7F].float()
        return torch.where(c >= 0x80, -magnitude, magnitude)

    def __getitem__(self, i):
        return E4M3(self.codes[i])


def e4m3(shape):
    return E4M3.round(uniform(shape, -E4M3_MAX, E4M3_MAX))


def quantize_per_token_group(x, block=128):
    """Activations per token and 128-wide group: scale = max(amax, 1e-4) / 448, codes in e4m3."""
    n, k = x.shape
    groups = (k + block - 1) // block
    codes = torch.empty_like(x)
    scales = torch.empty(n, groups)
    for g in range(groups):
        part = x[:, g * block:(g + 1) * block]
        scale = torch.clamp(part.abs().amax(dim=1), min=1e-4) / E4M3_MAX
        scales[:, g] = scale
        q = E4M3.round(part / scale[:, None]).float()
        codes[:, g * block:(g + 1) * block] = q
    return codes, scales


def linear_fp8(x, codes, w_scale, block=128):
    """Σ over k-groups of scale_x · scale_w · Σ code_x · code_w (fp64 sums)."""
    xq, xs = quantize_per_token_group(x, block)
    w = codes.float()
    n, k = x.shape
    m = w.shape[0]
    out = torch.zeros(n, m, dtype=torch.float64)
    for g in range((k + block - 1) // block):
        part = xq[:, g * block:(g + 1) * block].double() @ w[:, g * block:(g + 1) * block].double().T
        ws = w_scale[torch.arange(m) // block, g].double()
        out += part * xs[:, g:g + 1].double() * ws[None, :]
    return out.float()


cases = {}


def case(name, inputs, outputs):
    cases[name] = (inputs, outputs)


def make_linear():
    x, w = uniform((5, 64)), uniform((48, 64))
    case("linear_f32", {"x": x, "w": w}, {"out": (x.double() @ w.double().T).float()})
    x, w, s = uniform((3, 256)), e4m3((160, 256)), uniform((2, 2), 1e-4, 3e-4)
    case("linear_fp8", {"x": x, "w": w, "w_scale": s}, {"out": linear_fp8(x, w, s)})


def make_elementwise():
    table, ids = uniform((20, 16)), randint(0, 28, (7,))
    start = 4
    rows = ids.long() - start
    inside = (rows >= 0) & (rows < table.shape[0])
    out = torch.zeros(7, 16)
    out[inside] = table[rows[inside]]
    case("embedding", {"table": table, "ids": ids, "vocab_start": torch.tensor([start], dtype=torch.int32)},
         {"out": out})
    x = uniform((3, 40))
    case("zero", {"x": x}, {"out": torch.zeros_like(x)})
    x, weight, eps = uniform((6, 24)), uniform((16,), 0.5, 1.5), 1e-6
    head = x[:, :16]
    variance = (head.double() ** 2).mean(dim=1, keepdim=True).float()
    normed = weight * (head * torch.rsqrt(variance + eps))
    case("rms_norm", {"x": x, "weight": weight, "eps": torch.tensor([eps], dtype=torch.float32)},
         {"out": torch.cat([normed, x[:, 16:]], dim=1)})
    a, b = uniform((4, 10)), uniform((4, 10))
    case("add", {"a": a, "b": b}, {"out": a + b})
    gu = uniform((5, 24), -4, 4)
    gate, up = gu[:, :12], gu[:, 12:]
    case("silu_mul", {"gate_up": gu}, {"out": torch.nn.functional.silu(gate) * up})
    x, indices = uniform((6, 5)), torch.tensor([5, 0, 0, 3], dtype=torch.int32)
    case("gather_rows", {"x": x, "indices": indices}, {"out": x[indices.long()]})


def rope(x, positions, inv_freq, offset, dim, scaling, interleaved):
    """Dims [offset, offset + dim) of every head rotated; the output in the half-split layout."""
    half = dim // 2
    angle = positions.float()[:, None] * inv_freq[None, :]
    cos, sin = (torch.cos(angle) * scaling)[:, None, :], (torch.sin(angle) * scaling)[:, None, :]
    part = x[:, :, offset:offset + dim]
    a, b = (part[..., 0::2], part[..., 1::2]) if interleaved else (part[..., :half], part[..., half:])
    out = x.clone()
    out[:, :, offset:offset + half] = a * cos - b * sin
    out[:, :, offset + half:offset + dim] = b * cos + a * sin
    return out


def make_rope():
    for name, interleaved in (("rope_interleaved", True), ("rope_half", False)):
        x, positions = uniform((5, 3, 24)), randint(0, 4001, (5,))
        inv_freq = torch.tensor([10000.0 ** (-i / 8.0) for i in range(8)], dtype=torch.float32)
        scaling = 1.1
        case(name, {"x": x, "positions": positions, "inv_freq": inv_freq,
                    "offset": torch.tensor([8], dtype=torch.int32), "scaling": torch.tensor([scaling])},
             {"out": rope(x, positions, inv_freq, 8, 16, scaling, interleaved)})


def make_write_kv():
    rows, cache = uniform((4, 6)), uniform((10, 6))
    slots = torch.tensor([3, -1, 7, 0], dtype=torch.int64)
    out = cache.clone()
    for i, s in enumerate(slots.tolist()):
        if s >= 0:
            out[s] = rows[i]
    case("write_kv", {"rows": rows, "slots": slots, "cache": cache}, {"cache": out})


def route(logits, bias, n_group, topk_group, top_k, scaling):
    """DeepSeek-V3 routing: sigmoid, bias for selection, groups by their two best, top-k."""
    scores = torch.sigmoid(logits)
    choice = scores + bias
    n, experts = logits.shape
    per_group = experts // n_group
    ids, weights = [], []
    for t in range(n):
        g_scores = choice[t].view(n_group, per_group).topk(2, dim=1).values.sum(dim=1)
        groups = sorted(range(n_group), key=lambda g: (-g_scores[g].item(), g))[:topk_group]
        masked = torch.zeros(experts)
        for g in groups:
            masked[g * per_group:(g + 1) * per_group] = choice[t, g * per_group:(g + 1) * per_group]
        chosen = sorted(sorted(range(experts), key=lambda e: (-masked[e].item(), e))[:top_k])
        w = scores[t, chosen]
        w = w / (w.sum() + 1e-20) * scaling
        ids.append(chosen)
        weights.append(w)
    return torch.tensor(ids, dtype=torch.int32), torch.stack(weights)


def make_moe():
    logits, bias = uniform((6, 16), -3, 3), uniform((16,), -0.1, 0.1)
    ids, weights = route(logits, bias, 4, 2, 4, 2.5)
    case("moe_route", {"logits": logits, "bias": bias}, {"ids": ids, "weights": weights})
    for name, fp8 in (("moe_experts", False), ("moe_experts_fp8", True)):
        n, experts, hidden, inter = (3, 3, 256, 128) if fp8 else (5, 4, 32, 16)
        ids = torch.stack([torch.randperm(experts, generator=gen)[:2] for _ in range(n)]).to(torch.int32)
        weights, x = uniform((n, 2), 0.1, 1.0), uniform((n, hidden))
        inputs = {"ids": ids, "weights": weights, "x": x}
        if fp8:
            gu, du = e4m3((experts, 2 * inter, hidden)), e4m3((experts, hidden, inter))
            gus = uniform((experts, 2 * inter // 128, hidden // 128), 1e-4, 3e-4)
            dus = uniform((experts, hidden // 128, max(1, inter // 128)), 1e-4, 3e-4)
            inputs.update({"gate_up": gu, "gate_up_scale": gus, "down": du, "down_scale": dus})

            def expert(e, rows):
                h = linear_fp8(rows, gu[e], gus[e])
                act = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
                return linear_fp8(act, du[e], dus[e])
        else:
            gu, du = uniform((experts, 2 * inter, hidden)), uniform((experts, hidden, inter))
            inputs.update({"gate_up": gu, "down": du})

            def expert(e, rows):
                h = rows @ gu[e].T
                return (torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]) @ du[e].T
        out = torch.zeros(n, hidden, dtype=torch.float64)
        for t in range(n):
            for k in range(2):
                out[t] += weights[t, k].double() * expert(ids[t, k].item(), x[t:t + 1])[0].double()
        case(name, inputs, {"out": out.float()})


def make_mla():
    heads, nope, rope_dim, v, lora, page = 2, 16, 8, 16, 32, 4
    seqs = [(9, [5, 6, 7, 8]), (3, [0, 1, 2]), (6, [1, 3, 5])]
    width = max((kv + page - 1) // page for kv, _ in seqs)
    free = (torch.randperm(len(seqs) * width, generator=gen) + 1).tolist()
    meta, positions, tables, row = [], [], torch.zeros(len(seqs), width, dtype=torch.int32), 0
    for i, (kv, pos) in enumerate(seqs):
        meta += [row, len(pos), kv]
        positions += pos
        for p in range((kv + page - 1) // page):
            tables[i, p] = free[i * width + p]
        row += len(pos)
    slots = (len(free) + 1) * page
    q, cache = uniform((row, heads, nope + rope_dim)), uniform((slots, lora + rope_dim))
    kv_b = uniform((heads * (nope + v), lora), -0.2, 0.2)
    scale = 1.0 / math.sqrt(nope + rope_dim)
    inputs = {"q": q, "cache": cache, "kv_b": kv_b,
              "seqs": torch.tensor(meta, dtype=torch.int32).view(len(seqs), 3),
              "positions": torch.tensor(positions, dtype=torch.int32), "tables": tables,
              "dims": torch.tensor([heads, nope, rope_dim, v, lora, page], dtype=torch.int32),
              "softmax_scale": torch.tensor([scale], dtype=torch.float32)}
    w = kv_b.double().view(heads, nope + v, lora)
    out = torch.zeros(row, heads, v, dtype=torch.float64)
    for i, (kv, pos) in enumerate(seqs):
        rows = torch.stack([cache[tables[i, p // page] * page + p % page] for p in range(kv)]).double()
        latent, k_rope = rows[:, :lora], rows[:, lora:]
        for t, p in enumerate(pos):
            r = meta[3 * i] + t
            for h in range(heads):
                k_nope = latent @ w[h, :nope].T        # [kv, nope]
                values = latent @ w[h, nope:].T        # [kv, v]
                qh = q[r, h].double()
                scores = (k_nope[:p + 1] @ qh[:nope] + k_rope[:p + 1] @ qh[nope:]) * scale
                out[r, h] = torch.softmax(scores, dim=0) @ values[:p + 1]
    for name in ("mla_expanded", "mla_absorbed"):  # the two forms are the same function
        case(name, inputs, {"out": out.float()})


def split_mix(x):
    x = (x + 0x9e3779b97f4a7c15) & MASK64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & MASK64
    return x ^ (x >> 31)


def uniform_from_seed(seed, counter):
    mixed = split_mix(split_mix(seed) ^ ((counter * 0xd1b54a32d192ed03) & MASK64))
    return (mixed >> 11) * 2.0 ** -53


def sample_row(logits, p):
    """Penalties, mask, temperature, then argmax or one inverse-CDF draw (kernels/sampling.h)."""
    x = logits.clone()
    if p["repetition"] != 1.0:
        for t in p["seen"]:
            x[t] = x[t] / p["repetition"] if x[t] > 0 else x[t] * p["repetition"]
    for t, c in zip(p["output_ids"], p["output_counts"]):
        x[t] -= torch.tensor(p["frequency"] * c + (p["presence"] if c > 0 else 0.0), dtype=torch.float32)
    if p["masked"] >= 0:
        x[p["masked"]] = -math.inf
    if p["temperature"] != 0.0:
        x = x / torch.tensor(p["temperature"], dtype=torch.float32)
        probs = [math.exp(float(v) - float(x.max())) for v in x]
        order = list(range(len(probs)))
        rank = lambda t: (-probs[t], t)
        if 0 < p["top_k"] < len(probs):
            order = sorted(order, key=rank)[:p["top_k"]]
        if p["top_p"] < 1.0:
            order = sorted(order, key=rank)
            target, cum, keep = p["top_p"] * sum(probs[t] for t in order), 0.0, 0
            for t in order:
                cum += probs[t]
                keep += 1
                if cum >= target:
                    break
            order = order[:max(keep, 1)]
        if p["min_p"] > 0.0:
            threshold = p["min_p"] * max(probs[t] for t in order)
            order = [t for t in order if probs[t] >= threshold]
        u = uniform_from_seed(p["seed"], p["counter"]) * sum(probs[t] for t in order)
        token, cum = order[-1], 0.0
        for t in order:
            cum += probs[t]
            if cum > u and probs[t] > 0.0:
                token = t
                break
    else:
        token = int(torch.argmax(x))  # the first maximum: ties to the lower id
    lse = float(torch.logsumexp(x.double(), dim=0))
    top = sorted(range(len(x)), key=lambda t: (-float(x[t]), t))[:3]
    return token, float(x[token]) - lse, top, [float(x[t]) - lse for t in top]


def make_sample():
    vocab = 50
    logits = uniform((5, vocab), -4, 4)
    params = {"temperature": [0.0, 0.0, 0.8, 1.0, 1.3], "top_k": [-1, -1, 10, -1, -1],
              "top_p": [1.0, 1.0, 1.0, 0.7, 1.0], "min_p": [0.0, 0.0, 0.0, 0.05, 0.0],
              "repetition": [1.0, 1.3, 1.0, 1.2, 1.0], "frequency": [0.0, 0.5, 0.0, 0.3, 0.0],
              "presence": [0.0, 0.25, 0.0, 0.1, 0.0], "seed": [1, 2, 3, 4, 5], "counter": [0, 1, 7, 11, 3]}
    masked = [-1, int(randint(0, vocab, (1,))), -1, int(randint(0, vocab, (1,))), -1]
    seen, outputs = [], []
    for _ in range(5):
        perm = torch.randperm(vocab, generator=gen).tolist()
        seen.append(perm[:4])
        outputs.append(perm[4:7])
    counts = randint(1, 5, (5, 3))
    inputs = {"logits": logits, "seed": torch.tensor(params["seed"], dtype=torch.int64),
              "counter": torch.tensor(params["counter"], dtype=torch.int64),
              "top_k": torch.tensor(params["top_k"], dtype=torch.int32),
              "masked": torch.tensor(masked, dtype=torch.int32),
              "seen": torch.tensor(seen, dtype=torch.int32), "output_ids": torch.tensor(outputs, dtype=torch.int32),
              "output_counts": counts}
    for key in ("temperature", "top_p", "min_p", "repetition", "frequency", "presence"):
        inputs[key] = torch.tensor(params[key], dtype=torch.float32)
    tokens, logprobs, top_ids, top_logprobs = [], [], [], []
    for r in range(5):
        # The C++ row reads each fp32 parameter as a double: use the same rounded values.
        p = {key: float(inputs[key][r]) for key in ("temperature", "top_p", "min_p", "repetition", "frequency",
                                                     "presence")}
        p.update(top_k=params["top_k"][r], seed=params["seed"][r], counter=params["counter"][r], masked=masked[r],
                 seen=seen[r], output_ids=outputs[r], output_counts=counts[r].tolist())
        token, logprob, top, top_lp = sample_row(logits[r], p)
        tokens.append(token)
        logprobs.append(logprob)
        top_ids.append(top)
        top_logprobs.append(top_lp)
    case("sample", inputs, {"token": torch.tensor(tokens, dtype=torch.int32),
                            "logprob": torch.tensor(logprobs, dtype=torch.float32),
                            "top_ids": torch.tensor(top_ids, dtype=torch.int32),
                            "top_logprobs": torch.tensor(top_logprobs, dtype=torch.float32)})


def make_layer_norm():
    x, weight, bias, eps = uniform((6, 24), -1, 3), uniform((24,), 0.5, 1.5), uniform((24,)), 1e-6
    xd = x.double()
    mean = xd.mean(dim=1, keepdim=True)
    var = ((xd - mean) ** 2).mean(dim=1, keepdim=True)
    out = ((xd - mean) / torch.sqrt(var + eps) * weight.double() + bias.double()).float()
    case("layer_norm", {"x": x, "weight": weight, "bias": bias, "eps": torch.tensor([eps], dtype=torch.float32)},
         {"out": out})


def index_fp8_row(x):
    """kernels/dsa_ops.h's rule for one row: scale = max(amax, 1e-4) / 448, codes = e4m3(x / scale)."""
    scale = torch.clamp(x.abs().amax(), min=1e-4) / E4M3_MAX
    return E4M3.round(x / scale), scale


def make_write_index_keys():
    keys, slots, cache = uniform((4, 8), -2, 2), torch.tensor([3, -1, 7, 0], dtype=torch.int64), uniform((10, 8))
    out = cache.clone()
    for i, s in enumerate(slots.tolist()):
        if s >= 0:
            out[s] = keys[i]
    case("write_index_keys", {"keys": keys, "slots": slots, "cache": cache}, {"cache": out})
    keys, dim = uniform((4, 32), -2, 2), 32
    cache = torch.zeros(10, dim + 4, dtype=torch.uint8)
    out = cache.clone()
    for i, s in enumerate(slots.tolist()):
        if s >= 0:
            codes, scale = index_fp8_row(keys[i])
            out[s, :dim] = codes.codes
            out[s, dim:] = torch.tensor(list(struct.pack("<f", float(scale))), dtype=torch.uint8)
    case("write_index_keys_fp8", {"keys": keys, "slots": slots, "cache": cache}, {"cache": out})


def paged_seqs(long_kv, other_kv, page):
    """testing/op_cases.cc's MakePagedSeqs: queries at the end of a context, a short prompt, every
    third position of a longer one; pages scrambled, page 0 unused."""
    seqs = [(long_kv, list(range(long_kv - 4, long_kv))), (3, [0, 1, 2]), (other_kv, list(range(1, other_kv, 3)))]
    width = max((kv + page - 1) // page for kv, _ in seqs)
    free = (torch.randperm(len(seqs) * width, generator=gen) + 1).tolist()
    meta, positions, tables, row = [], [], torch.zeros(len(seqs), width, dtype=torch.int32), 0
    for i, (kv, pos) in enumerate(seqs):
        meta += [row, len(pos), kv]
        positions += pos
        for p in range((kv + page - 1) // page):
            tables[i, p] = free[i * width + p]
        row += len(pos)
    return seqs, meta, positions, tables, (len(free) + 1) * page, row


def integer_rows(rows, dim, fp8, amax_at):
    """Values in [-1, 1] and, for fp8, one ±7 a row (scale 1/64: exact codes): exact scores."""
    v = randint(-1, 2, (rows, dim)).float()
    if fp8:
        v[:, amax_at] = torch.where(randint(0, 2, (rows,)) == 1, 7.0, -7.0)
    return v


def make_indexer():
    heads, dim, topk, page, weight_scale = 4, 32, 6, 4, 0.125
    for name, fp8 in (("indexer_topk", False), ("indexer_topk_fp8", True)):
        seqs, meta, positions, tables, slots, rows = paged_seqs(9, 14, page)
        w = randint(-2, 3, (rows, heads)).float()
        q = integer_rows(rows * heads, dim, fp8, 0).view(rows, heads, dim)
        keys = integer_rows(slots, dim, fp8, 1)

        def used(x):
            if not fp8:
                return x.double()
            codes, scale = index_fp8_row(x)
            return codes.float().double() * float(scale)

        out = torch.full((rows, topk), -1, dtype=torch.int32)
        for i, (kv, pos) in enumerate(seqs):
            k = torch.stack([used(keys[tables[i, p // page] * page + p % page]) for p in range(kv)])
            for t, p in enumerate(pos):
                r = meta[3 * i] + t
                if p + 1 <= topk:
                    out[r, :p + 1] = torch.arange(p + 1, dtype=torch.int32)
                    continue
                qh = torch.stack([used(q[r, h]) for h in range(heads)])  # [heads, dim]
                dots = torch.clamp(k[:p + 1] @ qh.T, min=0.0)           # [keys, heads]
                score = (dots * (weight_scale * w[r].double())).sum(dim=1)
                order = torch.sort(score, descending=True, stable=True).indices[:topk]
                out[r] = order.to(torch.int32)
        inputs = {"q": q, "weights": w, "keys": keys, "seqs": torch.tensor(meta, dtype=torch.int32).view(len(seqs), 3),
                  "positions": torch.tensor(positions, dtype=torch.int32), "tables": tables,
                  "dims": torch.tensor([heads, dim, topk, page], dtype=torch.int32),
                  "weight_scale": torch.tensor([weight_scale], dtype=torch.float32)}
        case(name, inputs, {"topk": out})


def make_sparse_mla():
    heads, nope, rope_dim, v, lora, page, width = 2, 16, 8, 16, 32, 4, 5
    seqs, meta, positions, tables, slots, rows = paged_seqs(9, 6, page)
    q, cache = uniform((rows, heads, nope + rope_dim)), uniform((slots, lora + rope_dim))
    kv_b = uniform((heads * (nope + v), lora), -0.2, 0.2)
    scale = 1.0 / math.sqrt(nope + rope_dim)
    sel = torch.full((rows, width), -1, dtype=torch.int32)
    for r, p in enumerate(positions):
        take = min(width, p + 1)
        if r % 3 == 2:
            take = max(1, take // 2)
        sel[r, :take] = torch.randperm(p + 1, generator=gen)[:take].to(torch.int32)
    inputs = {"q": q, "cache": cache, "kv_b": kv_b,
              "seqs": torch.tensor(meta, dtype=torch.int32).view(len(seqs), 3),
              "positions": torch.tensor(positions, dtype=torch.int32), "tables": tables,
              "dims": torch.tensor([heads, nope, rope_dim, v, lora, page], dtype=torch.int32),
              "softmax_scale": torch.tensor([scale], dtype=torch.float32), "topk": sel}
    w = kv_b.double().view(heads, nope + v, lora)
    out = torch.zeros(rows, heads, v, dtype=torch.float64)
    for i, (kv, pos) in enumerate(seqs):
        for t, p in enumerate(pos):
            r = meta[3 * i] + t
            chosen = [c for c in sel[r].tolist() if c >= 0]
            rows_c = torch.stack([cache[tables[i, c // page] * page + c % page] for c in chosen]).double()
            latent, k_rope = rows_c[:, :lora], rows_c[:, lora:]
            for h in range(heads):
                qh = q[r, h].double()
                scores = (latent @ w[h, :nope].T @ qh[:nope] + k_rope @ qh[nope:]) * scale
                out[r, h] = torch.softmax(scores, dim=0) @ (latent @ w[h, nope:].T)
    for name in ("sparse_mla_expanded", "sparse_mla_absorbed"):
        case(name, inputs, {"out": out.float()})


DTYPES = {torch.float32: ("F32", 4), torch.int32: ("I32", 4), torch.int64: ("I64", 8), torch.uint8: ("U8", 1)}


def save_safetensors(path, tensors, metadata):
    """The safetensors layout: u64 header length, JSON header, the tensors' bytes."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        if isinstance(t, E4M3):
            dtype, data = "F8_E4M3", t.codes.contiguous().numpy().tobytes()
            shape = list(t.codes.shape)
        else:
            dtype, _ = DTYPES[t.dtype]
            data, shape = t.contiguous().numpy().tobytes(), list(t.shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    # New cases go last: the generator's earlier draws, and so the earlier cases, stay as they were.
    for make in (make_linear, make_elementwise, make_rope, make_write_kv, make_moe, make_mla, make_sample,
                 make_layer_norm, make_write_index_keys, make_indexer, make_sparse_mla):
        make()
    tensors = {}
    for name, (inputs, outputs) in cases.items():
        for key, t in inputs.items():
            tensors[f"{name}/in/{key}"] = t
        for key, t in outputs.items():
            tensors[f"{name}/out/{key}"] = t
    save_safetensors(args.out, tensors, {"torch": torch.__version__, "cases": ",".join(sorted(cases))})
    print(f"{len(cases)} cases, {len(tensors)} tensors -> {args.out}")


if __name__ == "__main__":
    main()
