#!/usr/bin/env python3
"""Trains the demo DeepSeek-V3-architecture model on synthetic arithmetic word problems, saves it and
measures its held-out accuracy through transformers.

Model: transformers' DeepseekV3ForCausalLM from a DeepseekV3Config (MLA with q LoRA, YaRN rope, a dense
first layer, then MoE layers with one shared expert and 8 routed experts, top-2 of them chosen inside
the best of 2 groups). Routed experts are kept balanced without an auxiliary loss: after every step
each layer's e_score_correction_bias moves by a small constant towards balanced expert loads.

Training text (loss weight 1 on the answers, 0.1 on the rest):
  * completion documents: "<s>Question: q1\\nAnswer: a1\\n\\nQuestion: q2\\nAnswer: a2 ... </s>" with
    1 to 6 problems, the lm-eval gsm8k few-shot layout; a tenth of them without <s>;
  * chat documents rendered with the model's chat template: single problems, multi-turn problems,
    a system prompt, the few-shot-as-multi-turn form and a few greetings.
Training runs under bf16 autocast with AdamW until a wall-clock deadline, then the weights are saved
in bf16 safetensors with per-expert tensor names (as published DeepSeek checkpoints have them) and the
routing bias, the folder is loaded back with from_pretrained, and the held-out split is evaluated
3-shot with greedy decoding and lm-eval's gsm8k filters (strict-match and flexible-extract).

usage: train.py --data DIR (train.jsonl, test.jsonl) --fewshot FIXTURES/train.jsonl
                --chat FIXTURES/chat.jsonl --model-dir DIR (tokenizer already there)
                --budget-s 200 --report OUT/report.json --samples OUT/eval_samples.jsonl
"""
import argparse
import json
import math
import os
import random
import re
import sys
import time
import traceback

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import AutoTokenizer, DeepseekV3Config, DeepseekV3ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_data as md  # noqa: E402

T_START = time.time()


def log(*args):
    print(f"[{time.time() - T_START:7.1f}s]", *args, flush=True)


# ---------------------------------------------------------------- model

ARCH = dict(
    hidden_size=256,
    intermediate_size=512,
    moe_intermediate_size=64,
    num_hidden_layers=5,
    num_attention_heads=8,
    num_key_value_heads=8,
    n_shared_experts=1,
    n_routed_experts=8,
    num_experts_per_tok=2,
    n_group=2,
    topk_group=1,
    routed_scaling_factor=2.5,
    norm_topk_prob=True,
    first_k_dense_replace=1,
    q_lora_rank=96,
    kv_lora_rank=64,
    qk_nope_head_dim=32,
    qk_rope_head_dim=16,
    v_head_dim=32,
    max_position_embeddings=2048,
    rms_norm_eps=1e-6,
    rope_interleave=True,
    tie_word_embeddings=False,
    initializer_range=0.02,
    attention_bias=False,
    attention_dropout=0.0,
    hidden_act="silu",
)
ROPE = dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=512,
            beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)


def make_config(vocab_size, bos, eos, pad):
    kw = dict(ARCH, vocab_size=vocab_size, bos_token_id=bos, eos_token_id=eos, pad_token_id=pad)
    try:
        cfg = DeepseekV3Config(**kw, rope_parameters=dict(ROPE))
    except TypeError:  # transformers 4.x
        rope = dict(ROPE)
        theta = rope.pop("rope_theta")
        cfg = DeepseekV3Config(**kw, rope_theta=theta, rope_scaling={**rope, "type": rope["rope_type"]})
    cfg._attn_implementation = "sdpa"
    return cfg


def init_weights(model, n_layers, seed):
    g = torch.Generator().manual_seed(seed)
    out_std = 0.02 / math.sqrt(2 * n_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.fill_(1.0)
            elif name.endswith("o_proj.weight") or "down_proj" in name:
                p.copy_(torch.randn(p.shape, generator=g) * out_std)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.zero_()


def moe_gates(model):
    gates = []
    for layer in model.model.layers:
        gate = getattr(layer.mlp, "gate", None)
        if gate is not None and hasattr(gate, "e_score_correction_bias"):
            gates.append(gate)
    return gates


def route_counts(h, weight, bias, cfg):
    """Expert loads under DeepSeek-V3 group-limited routing (what the router selects)."""
    E, G = cfg.n_routed_experts, cfg.n_group
    scores = torch.sigmoid(h.float() @ weight.float().t()) + bias.float()
    group = scores.view(-1, G, E // G).topk(2, dim=-1)[0].sum(-1)
    gidx = group.topk(cfg.topk_group, dim=-1)[1]
    gmask = torch.zeros_like(group).scatter_(1, gidx, 1.0)
    smask = gmask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E)
    scores = scores.masked_fill(smask == 0, float("-inf"))
    idx = scores.topk(cfg.num_experts_per_tok, dim=-1)[1]
    return torch.bincount(idx.flatten(), minlength=E)


# ---------------------------------------------------------------- checkpoint

def canonical_state_dict(sd):
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


def save_model(model, cfg, model_dir, eos_ids):
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    fused = any(k.endswith("experts.gate_up_proj") for k in sd)
    canon = canonical_state_dict(sd)
    stored = {}
    for k, v in canon.items():
        if k.endswith("e_score_correction_bias"):
            stored[k] = v.float().contiguous().clone()  # fp32, as DeepSeek-V3 ships it
        else:
            stored[k] = v.to(torch.bfloat16).contiguous().clone()
    if "lm_head.weight" not in stored:
        raise RuntimeError("lm_head.weight missing from the state dict")
    for f in os.listdir(model_dir):
        if f.endswith(".safetensors") or f.endswith(".safetensors.index.json"):
            os.remove(os.path.join(model_dir, f))
    save_file(stored, os.path.join(model_dir, "model.safetensors"), metadata={"format": "pt"})
    cfg.save_pretrained(model_dir)
    path = os.path.join(model_dir, "config.json")
    c = json.load(open(path))
    c["architectures"] = ["DeepseekV3ForCausalLM"]
    if "torch_dtype" in c:
        c["torch_dtype"] = "bfloat16"
    c["dtype"] = "bfloat16"
    c["use_cache"] = True
    json.dump(c, open(path, "w"), indent=2, sort_keys=True)
    gen = {"bos_token_id": cfg.bos_token_id, "eos_token_id": eos_ids, "pad_token_id": cfg.pad_token_id,
           "do_sample": False, "max_new_tokens": 256, "transformers_version": transformers.__version__}
    json.dump(gen, open(os.path.join(model_dir, "generation_config.json"), "w"), indent=2)
    names = sorted(stored)
    return {"in_memory_fused_experts": fused, "tensors": len(stored),
            "bytes": os.path.getsize(os.path.join(model_dir, "model.safetensors")),
            "expert_names_sample": [n for n in names if ".experts." in n][:3],
            "has_e_score_correction_bias": any(n.endswith("e_score_correction_bias") for n in names)}


# ---------------------------------------------------------------- data

class Docs:
    """Builds token documents with per-token loss weights from pre-tokenized segments."""

    Q_WEIGHT = 0.1

    def __init__(self, tok, problems, rng, bos, eos, im_end):
        self.tok, self.rng = tok, rng
        self.bos, self.eos, self.im_end = bos, eos, im_end
        self.problems = problems
        self.tool_frac = 0.0  # share of chat documents that offer tools
        self.tool_avoid = set()  # held-out tool-call user turns, never trained on
        t = time.time()
        first = [f"Question: {p['question']}\nAnswer:" for p in problems]
        nxt = [f"\n\nQuestion: {p['question']}\nAnswer:" for p in problems]
        ans = [" " + p["answer"] for p in problems]
        self.first = self.encode(first)
        self.next = self.encode(nxt)
        self.ans = self.encode(ans)
        log(f"encoded {len(problems)} problems in {time.time() - t:.1f}s")

    def encode(self, texts):
        fast = getattr(self.tok, "encode_batch_fast", None)
        encs = (fast or self.tok.encode_batch)(texts, add_special_tokens=False)
        return [e.ids for e in encs]

    def check_segmentation(self, n=200):
        """Segment-wise encoding must equal encoding the whole text; returns the mismatch count."""
        bad = 0
        for _ in range(n):
            k = self.rng.randint(1, 4)
            idx = [self.rng.randrange(len(self.problems)) for _ in range(k)]
            ids, _ = self.completion(idx, with_bos=False, with_eos=False)
            text = "\n\n".join(f"Question: {self.problems[i]['question']}\nAnswer: {self.problems[i]['answer']}"
                               for i in idx)
            if ids != self.tok.encode(text, add_special_tokens=False).ids:
                bad += 1
        return bad

    def completion(self, idx, with_bos=True, with_eos=True):
        ids, w = [], []
        if with_bos:
            ids.append(self.bos)
            w.append(0.0)
        for j, i in enumerate(idx):
            q = self.first[i] if j == 0 else self.next[i]
            ids += q
            qw = [self.Q_WEIGHT] * len(q)
            if j > 0:  # "\n", "\n", "Question" end the previous answer
                for t in range(min(3, len(qw))):
                    qw[t] = 1.0
            w += qw
            a = self.ans[i]
            ids += a
            w += [1.0] * len(a)
        if with_eos:
            ids.append(self.eos)
            w.append(1.0)
        return ids, w

    def sample_completion(self, k):
        idx = [self.rng.randrange(len(self.problems)) for _ in range(k)]
        return self.completion(idx, with_bos=self.rng.random() >= 0.1)

    def chat_segments(self):
        """One chat document as [(text, weight)], rendered as the chat template renders it."""
        if self.rng.random() < self.tool_frac:
            return self.tool_segments()
        r = self.rng.random()
        P = self.problems
        pick = lambda: P[self.rng.randrange(len(P))]  # noqa: E731
        msgs = []
        if r < 0.08:
            u, a = self.rng.choice(md.GREETINGS)
            msgs = [("user", u), ("assistant", a)]
            if self.rng.random() < 0.5:
                p = pick()
                msgs += [("user", p["question"]), ("assistant", p["answer"])]
        elif r < 0.45:
            p = pick()
            msgs = [("user", p["question"]), ("assistant", p["answer"])]
        elif r < 0.6:
            p = pick()
            msgs = [("system", self.rng.choice(md.SYSTEM_PROMPTS)), ("user", p["question"]),
                    ("assistant", p["answer"])]
        elif r < 0.75:
            for _ in range(self.rng.randint(2, 3)):
                p = pick()
                msgs += [("user", p["question"]), ("assistant", p["answer"])]
        else:
            for _ in range(self.rng.randint(1, 6)):
                p = pick()
                msgs += [("user", md.eval_turn(p)), ("assistant", p["answer"])]
        segs, prefix = [], md.BOS
        for role, content in msgs:
            if role == "assistant":
                prefix += md.IM_START + "assistant\n"
                segs.append((prefix, self.Q_WEIGHT))
                segs.append((content, 1.0))
                segs.append((md.IM_END, 1.0))
                prefix = "\n"
            else:
                prefix += md.IM_START + role + "\n" + content + md.IM_END + "\n"
        return segs

    def tool_segments(self):
        """One conversation that offers tools (make_data.make_tool_conversation), as [(text, weight)]."""
        while True:
            tools, msgs, _, _ = md.make_tool_conversation(self.rng)
            users = [m["content"] for m in msgs if m["role"] == "user"]
            if not any(u in self.tool_avoid for u in users):
                break
        system = msgs[0]["content"] if msgs[0]["role"] == "system" else None
        segs, prefix = [], md.BOS + md.tools_block(tools, system)
        for m in msgs[1:] if system is not None else msgs:
            if m["role"] == "assistant":
                prefix += md.IM_START + "assistant\n"
                segs.append((prefix, self.Q_WEIGHT))
                segs.append((md.assistant_body(m), 1.0))
                segs.append((md.IM_END, 1.0))
                prefix = "\n"
            else:
                prefix += md.IM_START + m["role"] + "\n" + m["content"] + md.IM_END + "\n"
        return segs

    def build_chat_pool(self, n):
        t = time.time()
        docs = [self.chat_segments() for _ in range(n)]
        flat = [s for d in docs for s, _ in d]
        enc = self.encode(flat)
        pool, j = [], 0
        for d in docs:
            ids, w = [], []
            for _, wt in d:
                e = enc[j]
                j += 1
                ids += e
                w += [wt] * len(e)
            if ids and ids[0] == self.bos:
                w[0] = 0.0
            pool.append((ids, w))
        self.chat_pool = pool
        # check: segment-wise encoding equals encoding the whole rendered text
        bad = 0
        for d, (ids, _) in zip(docs[:200], pool[:200]):
            if ids != self.tok.encode("".join(s for s, _ in d), add_special_tokens=False).ids:
                bad += 1
        log(f"chat pool: {n} documents in {time.time() - t:.1f}s, segmentation mismatches {bad}/200")
        return bad

    def sample_chat_batch(self, budget_tokens):
        """Chat documents of one length bucket, about budget_tokens tokens after padding."""
        if not hasattr(self, "chat_buckets"):
            self.chat_buckets = {}
            for d in self.chat_pool:
                cap = 128
                while cap < len(d[0]):
                    cap *= 2
                self.chat_buckets.setdefault(cap, []).append(d)
            self.chat_bucket_keys = sorted(self.chat_buckets)
            self.chat_bucket_sizes = [len(self.chat_buckets[c]) for c in self.chat_bucket_keys]
        cap = self.rng.choices(self.chat_bucket_keys, weights=self.chat_bucket_sizes)[0]
        bucket = self.chat_buckets[cap]
        rows = max(4, budget_tokens // cap)
        return [bucket[self.rng.randrange(len(bucket))] for _ in range(rows)]


def make_batch(docs, budget_tokens, device, pad, chat_frac=0.2):
    """A right-padded batch of similar-length documents: input ids and per-token loss weights."""
    if docs.rng.random() < chat_frac:
        seqs = docs.sample_chat_batch(budget_tokens)
    else:
        k = docs.rng.randint(1, 6)
        rows = max(4, budget_tokens // (85 * k))
        seqs = [docs.sample_completion(k) for _ in range(rows)]
    L = min(max(len(s[0]) for s in seqs), 2048)
    flat_ids, flat_w = [], []
    for s, ws in seqs:
        s, ws = s[:L], ws[:L]
        flat_ids += s
        flat_ids += [pad] * (L - len(s))
        flat_w += ws
        flat_w += [0.0] * (L - len(ws))
    ids = torch.tensor(flat_ids, dtype=torch.long).view(len(seqs), L)
    w = torch.tensor(flat_w, dtype=torch.float32).view(len(seqs), L)
    return ids.to(device, non_blocking=True), w.to(device, non_blocking=True)


def weighted_loss(logits, ids, w):
    tgt = ids[:, 1:]
    wt = w[:, 1:]
    ce = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                         reduction="none").view_as(wt)
    return (ce * wt).sum() / wt.sum().clamp(min=1.0), ce, wt


# ---------------------------------------------------------------- evaluation (lm-eval gsm8k semantics)

STOP = ["Question:", "</s>", "<|im_end|>"]
FLEX = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")


def normalize(s):
    s = s.replace(",", "").replace("$", "")
    s = re.sub(r"(?s).*#### ", "", s)
    s = re.sub(r"\.$", "", s)
    return s.strip()


def flexible_extract(resp):
    m = FLEX.findall(resp)
    if not m:
        return "[invalid]"
    g = m[-1]
    return (g[0] or g[1]).strip()


def strict_extract(resp):
    m = STRICT.findall(resp)
    return m[0].strip() if m else "[invalid]"


def cut(text):
    end = len(text)
    for s in STOP:
        i = text.find(s)
        if i >= 0:
            end = min(end, i)
    return text[:end]


def fewshot_prompt(q, shots):
    ctx = "\n\n".join(f"Question: {s['question']}\nAnswer: {s['answer']}" for s in shots)
    return ctx + "\n\n" + f"Question: {q}\nAnswer:"


USE_STOP_STRINGS = [True]


@torch.no_grad()
def greedy_generate(model, hf, prompts, device, eos_ids, pad, max_new=256, batch=125, add_special=True):
    hf.padding_side = "left"
    outs = []
    for i in range(0, len(prompts), batch):
        enc = hf(prompts[i:i + batch], return_tensors="pt", padding=True, add_special_tokens=add_special)
        enc = {k: v.to(device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
        kw = dict(max_new_tokens=max_new, do_sample=False, eos_token_id=eos_ids, pad_token_id=pad)
        gen = None
        if USE_STOP_STRINGS[0]:
            try:
                gen = model.generate(**enc, **kw, stop_strings=["Question:"], tokenizer=hf)
            except Exception as e:
                log("generate without stop_strings from now on:", repr(e)[:300])
                USE_STOP_STRINGS[0] = False
        if gen is None:
            gen = model.generate(**enc, **kw)
        new = gen[:, enc["input_ids"].shape[1]:]
        outs += hf.batch_decode(new, skip_special_tokens=False)
    return outs


def clean(text):
    return cut(text).replace("<pad>", "")


def evaluate(model, hf, test, fewshot, device, eos_ids, pad, shots=3, seed=1234, limit=None):
    rng = random.Random(seed)
    docs = test[:limit] if limit else test
    prompts, targets = [], []
    for d in docs:
        prompts.append(fewshot_prompt(d["question"], rng.sample(fewshot, shots)))
        targets.append(normalize(d["answer"]))
    t = time.time()
    raw = greedy_generate(model, hf, prompts, device, eos_ids, pad)
    secs = time.time() - t
    samples, flex_ok, strict_ok = [], 0, 0
    for d, p, r, tgt in zip(docs, prompts, raw, targets):
        resp = clean(r)
        fx = normalize(flexible_extract(resp))
        st = normalize(strict_extract(resp))
        flex_ok += fx == tgt
        strict_ok += st == tgt
        samples.append({"question": d["question"], "target": tgt, "response": resp,
                        "flexible_extract": fx, "strict_match": st, "correct": fx == tgt})
    n = len(docs)

    def stderr(k):
        p = k / n
        return math.sqrt(p * (1 - p) / (n - 1)) if n > 1 else 0.0

    res = {"n": n, "num_fewshot": shots, "fewshot_seed": seed,
           "flexible_extract": flex_ok / n, "flexible_extract_stderr": stderr(flex_ok),
           "strict_match": strict_ok / n, "strict_match_stderr": stderr(strict_ok),
           "prompt_tokens_mean": None, "generate_seconds": round(secs, 1)}
    return res, samples, prompts


@torch.no_grad()
def chat_eval(model, hf, chats, device, eos_ids, pad):
    texts = [hf.apply_chat_template(c["messages"], add_generation_prompt=True, tokenize=False) for c in chats]
    raw = greedy_generate(model, hf, texts, device, eos_ids, pad, max_new=200, batch=len(texts),
                          add_special=False)
    out, ok, n = [], 0, 0
    for c, text, r in zip(chats, texts, raw):
        resp = clean(r)
        rec = {"messages": c["messages"], "response": resp}
        if c.get("answer") is not None:
            n += 1
            fx = normalize(flexible_extract(resp))
            rec["expected"] = c["answer"]
            rec["correct"] = fx == c["answer"]
            ok += rec["correct"]
        out.append(rec)
    return {"chat_problems": n, "chat_correct": ok,
            "template_matches_python": all(t == md.render_chat(c["messages"], True) for c, t in zip(chats, texts))}, out


TOOL_CALL_RE = re.compile(r"^\s*<tool_call>\n(.*)\n</tool_call>\s*$", re.S)


def parse_tool_call(resp):
    """The call in an assistant turn of the form <tool_call>\\n{json}\\n</tool_call>, or None."""
    m = TOOL_CALL_RE.match(resp)
    if not m:
        return None
    try:
        call = json.loads(m.group(1))
    except ValueError:
        return None
    if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
        return None
    return call


@torch.no_grad()
def tool_eval(model, hf, items, device, eos_ids, pad):
    """Held-out conversations that offer tools: 'call' items must produce the expected call (the
    turn parsed as JSON equals it); 'answer' items (after the tool result) the expected answer."""
    texts = [hf.apply_chat_template(it["messages"], tools=it["tools"], add_generation_prompt=True, tokenize=False)
             for it in items]
    match = all(t == md.render_chat(it["messages"], True, tools=it["tools"]) for it, t in zip(items, texts))
    raw = greedy_generate(model, hf, texts, device, eos_ids, pad, max_new=96, batch=100, add_special=False)
    out = []
    calls = calls_ok = calls_exact = answers = answers_ok = 0
    for it, r in zip(items, raw):
        resp = clean(r)
        rec = {"kind": it["kind"], "messages": it["messages"], "response": resp}
        if it["kind"] == "call":
            calls += 1
            got = parse_tool_call(resp)
            rec["expected"] = it["expected"]
            rec["correct"] = got == it["expected"]
            rec["exact_text"] = resp == md.tool_call_text(it["expected"]["name"], it["expected"]["arguments"])
            calls_ok += rec["correct"]
            calls_exact += rec["exact_text"]
        else:
            answers += 1
            if it["answer"].lstrip("-").isdigit():
                rec["correct"] = normalize(flexible_extract(resp)) == it["answer"]
            else:
                rec["correct"] = resp.strip() == it["answer"]
            rec["expected"] = it["answer"]
            answers_ok += rec["correct"]
        out.append(rec)
    res = {"tool_calls": calls, "tool_calls_correct": calls_ok, "tool_call_accuracy": calls_ok / max(1, calls),
           "tool_calls_exact_text": calls_exact, "tool_answers": answers, "tool_answers_correct": answers_ok,
           "tool_answer_accuracy": answers_ok / max(1, answers), "template_matches_python": match}
    return res, out


@torch.no_grad()
def examples(model, hf, device, eos_ids, pad):
    """A few requests an end-to-end test can send, with and without tools."""
    sam = "Sam has 4 boxes with 6 pens in each box. How many pens does he have?"
    cases = [
        ([{"role": "user", "content": sam}], None),
        ([{"role": "user", "content": sam}], md.TOOLS),
        ([{"role": "user", "content": "What is 12 + 5?"}], md.TOOLS),
        ([{"role": "user", "content": "What is the weather in Paris?"}], md.TOOLS),
        ([{"role": "user", "content": "Hello"}], md.TOOLS),
        ([{"role": "user", "content": "What is 12 + 5?"}, md.call_message("add", {"a": 12, "b": 5}),
          {"role": "tool", "content": "17"}], md.TOOLS),
        ([{"role": "user", "content": "What is 12 + 5?"},
          {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function", "function": {
              "name": "add", "arguments": "{\"a\": 12, \"b\": 5}"}}]},
          {"role": "tool", "tool_call_id": "call_0", "content": "17"}], md.TOOLS),
    ]
    texts = [hf.apply_chat_template(m, tools=t, add_generation_prompt=True, tokenize=False) for m, t in cases]
    raw = greedy_generate(model, hf, texts, device, eos_ids, pad, max_new=128, batch=len(texts), add_special=False)
    return [{"messages": m, "tools": [x["function"]["name"] for x in t] if t else None, "response": clean(r)}
            for (m, t), r in zip(cases, raw)]


# ---------------------------------------------------------------- main

def load_hf_tokenizer(model_dir):
    try:
        return AutoTokenizer.from_pretrained(model_dir)
    except Exception:
        traceback.print_exc()
        log("AutoTokenizer failed; building PreTrainedTokenizerFast from tokenizer.json")
        from transformers import PreTrainedTokenizerFast
        hf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(model_dir, "tokenizer.json"),
                                     bos_token=md.BOS, eos_token=md.EOS, pad_token=md.PAD)
        hf.chat_template = md.CHAT_TEMPLATE
        return hf


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--fewshot", required=True)
    ap.add_argument("--chat", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--budget-s", type=float, default=200.0)
    ap.add_argument("--tokens-per-step", type=int, default=49152)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1130)
    ap.add_argument("--report", required=True)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--chat-out", required=True)
    ap.add_argument("--eval-limit", type=int, default=None)
    ap.add_argument("--tools", help="held-out tool-call conversations (tool_calls.jsonl)")
    ap.add_argument("--tool-out", help="where the tool-call responses go")
    ap.add_argument("--chat-frac", type=float, default=0.3, help="share of batches made of chat documents")
    ap.add_argument("--tool-frac", type=float, default=0.5, help="share of chat documents that offer tools")
    args = ap.parse_args()

    report = {"torch": torch.__version__, "transformers": transformers.__version__, "args": vars(args)}

    def flush_report():
        with open(args.report, "w") as f:
            json.dump(report, f, indent=2)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    report["device"] = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    hf = load_hf_tokenizer(args.model_dir)
    raw_tok = Tokenizer.from_file(os.path.join(args.model_dir, "tokenizer.json"))
    bos, eos, pad = (hf.convert_tokens_to_ids(t) for t in (md.BOS, md.EOS, md.PAD))
    im_end = hf.convert_tokens_to_ids(md.IM_END)
    eos_ids = [eos, im_end]
    vocab = ((len(hf) + 63) // 64) * 64
    report["tokenizer_vocab"] = len(hf)
    report["model_vocab"] = vocab
    log(f"tokenizer {len(hf)} tokens, model vocab {vocab}, bos {bos} eos {eos} pad {pad} im_end {im_end}")

    train = read_jsonl(os.path.join(args.data, "train.jsonl"))
    test = read_jsonl(os.path.join(args.data, "test.jsonl"))
    fewshot = read_jsonl(args.fewshot)
    chats = read_jsonl(args.chat)
    test_q = {d["question"] for d in test}
    assert not any(d["question"] in test_q for d in train), "train/test overlap"
    val = train[-1000:]
    train = train[:-1000]
    log(f"train {len(train)} val {len(val)} test {len(test)} fewshot {len(fewshot)} chats {len(chats)}")

    rng = random.Random(args.seed)
    docs = Docs(raw_tok, train, rng, bos, eos, im_end)
    tool_items = read_jsonl(args.tools) if args.tools else []
    if tool_items:
        docs.tool_frac = args.tool_frac
        docs.tool_avoid = {m["content"] for it in tool_items for m in it["messages"] if m["role"] == "user"}
        log(f"tool conversations: {len(tool_items)} held out, {len(docs.tool_avoid)} user turns avoided")
    report["segmentation_mismatches_completion"] = docs.check_segmentation()
    report["segmentation_mismatches_chat"] = docs.build_chat_pool(40000)
    log("segmentation mismatches:", report["segmentation_mismatches_completion"], report["segmentation_mismatches_chat"])
    vdocs = Docs(raw_tok, val, random.Random(7), bos, eos, im_end)
    vbatch = [vdocs.completion([4 * i + j for j in range(4)]) for i in range(64)]

    cfg = make_config(vocab, bos, eos, pad)
    model = DeepseekV3ForCausalLM(cfg)
    init_weights(model, cfg.num_hidden_layers, args.seed)
    model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    report["parameters"] = n_params
    log(f"model: {n_params / 1e6:.2f}M parameters")
    log("state dict sample:", [k for k in model.state_dict() if ".layers.1." in k][:40])

    gates = moe_gates(model)
    captured = {}
    hooks = []
    for li, g in enumerate(gates):
        def pre(mod, args_, kwargs_, li=li):
            xs = [a for a in list(args_) + list(kwargs_.values()) if torch.is_tensor(a)]
            if xs:
                captured[li] = xs[0].detach()
        hooks.append(g.register_forward_pre_hook(pre, with_kwargs=True))
    log(f"{len(gates)} MoE gates")

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=(device == "cuda"))

    @torch.no_grad()
    def val_metrics():
        model.eval()
        L = max(len(s) for s, _ in vbatch)
        ids = torch.full((len(vbatch), L), pad, dtype=torch.long)
        w = torch.zeros((len(vbatch), L))
        for r, (s, ws) in enumerate(vbatch):
            ids[r, :len(s)] = torch.tensor(s)
            w[r, :len(ws)] = torch.tensor(ws)
        ids, w = ids.to(device), w.to(device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=(device == "cuda")):
            logits = model(input_ids=ids).logits
        loss, _, wt = weighted_loss(logits, ids, w)
        pred = logits[:, :-1].argmax(-1)
        m = wt == 1.0
        acc = ((pred == ids[:, 1:]) & m).sum().item() / max(1, m.sum().item())
        model.train()
        return loss.item(), acc

    @torch.no_grad()
    def balance_step(loads):
        """Auxiliary-loss-free balancing: move each layer's bias towards balanced expert loads."""
        for li, g in enumerate(gates):
            h = captured.get(li)
            if h is None:
                continue
            h = h.reshape(-1, h.shape[-1])
            cnt = route_counts(h, g.weight, g.e_score_correction_bias, cfg).float()
            b = g.e_score_correction_bias
            b.add_(gamma * torch.sign(cnt.mean() - cnt))
            b.sub_(b.min())  # keep scores + bias positive; selection is shift-invariant
            loads.append(cnt)

    # ---- train
    balance = len(gates) > 0
    model.train()
    t0 = time.time()
    deadline = t0 + args.budget_s
    step, tokens, losses = 0, 0, []
    history = []
    gamma = 1e-3
    train_error = None
    try:
        while True:
            now = time.time()
            if now >= deadline:
                break
            frac = (now - t0) / args.budget_s
            lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
            for gparam in opt.param_groups:
                gparam["lr"] = lr
            ids, w = make_batch(docs, args.tokens_per_step, device, pad, args.chat_frac)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=(device == "cuda")):
                logits = model(input_ids=ids).logits
            loss, _, _ = weighted_loss(logits, ids, w)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            # auxiliary-loss-free balancing: move each layer's bias towards balanced loads
            loads = []
            if balance:
                try:
                    balance_step(loads)
                except Exception as e:
                    traceback.print_exc()
                    log("expert balancing disabled:", repr(e))
                    balance = False
            captured.clear()
            tokens += ids.numel()
            losses.append(loss.detach())
            step += 1
            if step % 200 == 0:
                lv = torch.stack(losses).mean().item()
                losses = []
                imb = max((c.max() / c.mean()).item() for c in loads) if loads else float("nan")
                msg = dict(step=step, t=round(time.time() - t0, 1), loss=round(lv, 4), lr=round(lr, 6),
                           gnorm=round(float(gn), 3), tok_per_s=int(tokens / (time.time() - t0)),
                           max_load_over_mean=round(imb, 3))
                if step % 1000 == 0:
                    vl, va = val_metrics()
                    msg.update(val_loss=round(vl, 4), val_answer_token_acc=round(va, 4))
                history.append(msg)
                log(json.dumps(msg))
                if not math.isfinite(lv):
                    raise RuntimeError("loss is not finite")
    except Exception as e:
        train_error = repr(e)
        traceback.print_exc()
        log("TRAINING STOPPED BY ERROR; saving what there is")
    for hk in hooks:
        hk.remove()
    train_s = time.time() - t0
    vl, va = val_metrics()
    report["train"] = {"steps": step, "seconds": round(train_s, 1), "tokens": tokens, "error": train_error,
                       "final_val_loss": vl, "final_val_answer_token_acc": va, "history": history,
                       "e_score_correction_bias": [g.e_score_correction_bias.tolist() for g in gates]}
    log(f"trained {step} steps in {train_s:.1f}s, {tokens / 1e6:.1f}M tokens; val loss {vl:.4f} answer-token acc {va:.4f}")
    flush_report()

    # ---- save
    model.eval()
    report["save"] = save_model(model, model.config, args.model_dir, eos_ids)
    log("saved:", json.dumps(report["save"]))
    flush_report()

    # ---- reload the saved folder and check it holds exactly the trained weights (rounded to bf16)
    eval_model = None
    try:
        try:
            eval_model = DeepseekV3ForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32,
                                                               attn_implementation="sdpa")
        except TypeError:
            eval_model = DeepseekV3ForCausalLM.from_pretrained(args.model_dir, torch_dtype=torch.float32)
        eval_model.to(device).eval()
        stored = load_file(os.path.join(args.model_dir, "model.safetensors"))
        reloaded = canonical_state_dict({k: v.detach().cpu() for k, v in eval_model.state_dict().items()})
        missing = sorted(set(stored) - set(reloaded))
        extra = sorted(set(reloaded) - set(stored))
        maxdiff = max((reloaded[k].float() - stored[k].float()).abs().max().item() for k in stored if k in reloaded)
        report["reload"] = {"ok": not missing and not extra and maxdiff == 0.0, "missing": missing[:10],
                            "unexpected": extra[:10], "max_abs_diff": maxdiff}
    except Exception as e:
        traceback.print_exc()
        report["reload"] = {"ok": False, "error": repr(e)}
    log("reload:", json.dumps(report["reload"]))
    if eval_model is None or not report["reload"].get("ok"):
        log("evaluating the in-memory model rounded to bf16 instead")
        eval_model = model.to(torch.bfloat16).float().eval()
        report["eval_model"] = "in-memory, bf16-rounded"
    else:
        report["eval_model"] = "reloaded from model dir, fp32 compute"
        del model
    flush_report()

    # ---- held-out accuracy
    try:
        res, samples, prompts = evaluate(eval_model, hf, test, fewshot, device, eos_ids, pad, limit=args.eval_limit)
        lens = [len(hf(p)["input_ids"]) for p in prompts]
        res["prompt_tokens_mean"] = sum(lens) / len(lens)
        res["prompt_tokens_max"] = max(lens)
        report["eval"] = res
        with open(args.samples, "w") as f:
            for s in samples:
                f.write(json.dumps(s, ensure_ascii=False) + "\n")
        log("EVAL", json.dumps(res))
        log(f"|gsm8k-synthetic|3|flexible-extract|exact_match|{res['flexible_extract']:.4f}|"
            f"{res['flexible_extract_stderr']:.4f}|")
        log(f"|gsm8k-synthetic|3|strict-match    |exact_match|{res['strict_match']:.4f}|"
            f"{res['strict_match_stderr']:.4f}|")
        wrong = [s for s in samples if not s["correct"]][:5]
        for s in wrong:
            log("WRONG:", json.dumps(s, ensure_ascii=False)[:600])
        # batch-1, unpadded greedy on a few prompts: must give the same responses as the padded batch
        same = 0
        for p, s in zip(prompts[:6], samples[:6]):
            r = clean(greedy_generate(eval_model, hf, [p], device, eos_ids, pad, batch=1)[0])
            same += r == s["response"]
        report["eval"]["unpadded_agreement_6"] = same
        log(f"unpadded batch-1 agreement {same}/6")
    except Exception as e:
        traceback.print_exc()
        report["eval"] = {"error": repr(e)}
    flush_report()

    try:
        cres, cout = chat_eval(eval_model, hf, chats, device, eos_ids, pad)
        report["chat"] = cres
        with open(args.chat_out, "w") as f:
            for c in cout:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
        log("CHAT", json.dumps(cres))
        for c in cout[:6]:
            log("chat:", json.dumps(c["messages"][-1]["content"])[:120], "->", json.dumps(c["response"])[:300])
    except Exception as e:
        traceback.print_exc()
        report["chat"] = {"error": repr(e)}
    if tool_items:
        try:
            tres, tout = tool_eval(eval_model, hf, tool_items, device, eos_ids, pad)
            report["tools"] = tres
            with open(args.tool_out, "w") as f:
                for c in tout:
                    f.write(json.dumps(c, ensure_ascii=False) + "\n")
            log("TOOLS", json.dumps(tres))
            for c in [c for c in tout if not c["correct"]][:8]:
                log("TOOL WRONG:", json.dumps(c["messages"][-1]["content"])[:120], "->", json.dumps(c["response"])[:300],
                    "expected", json.dumps(c["expected"])[:200])
        except Exception as e:
            traceback.print_exc()
            report["tools"] = {"error": repr(e)}
        try:
            report["examples"] = examples(eval_model, hf, device, eos_ids, pad)
            for ex in report["examples"]:
                log("example:", json.dumps(ex["messages"][-1]["content"]), "tools", ex["tools"], "->",
                    json.dumps(ex["response"]))
        except Exception as e:
            traceback.print_exc()
            report["examples"] = {"error": repr(e)}
    report["total_seconds"] = round(time.time() - T_START, 1)
    flush_report()
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
