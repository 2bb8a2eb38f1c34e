#!/usr/bin/env python3
"""Trains the demo DeepSeek-V3-architecture model on synthetic arithmetic word problems, saves it and
measures its held-out accuracy through transformers.

Model: transformers' DeepseekV3ForCausalLM from a DeepseekV3Config (MLA with q LoRA, YaRN rope, a dense
first layer, then MoE layers with one shared expert and 8 routed experts, top-2 of them chosen inside
the best of 2 groups). Routed experts are kept balanced without an auxiliary loss: after every step
each layer's e_score_correction_bias moves by a small constant towards balanced expert loads.

Training text (loss weight 1 on the answers, 0.1 on the rest), over the template problems (train.jsonl)
and, when the data has them, the paraphrased problems (paraphrase.jsonl, drawn with probability
--paraphrase-frac):
  * completion documents: "<s>Question: q1\\nAnswer: a1\\n\\nQuestion: q2\\nAnswer: a2 ... </s>" with
    1 to 6 problems, the lm-eval gsm8k few-shot layout; a tenth of them without <s>;
  * chat documents rendered with the model's chat template: single problems, multi-turn problems,
    a system prompt, the few-shot-as-multi-turn form, a few greetings and conversations with tools.

MTP (NextN) draft layer (--mtp 1): DeepSeek-V3's multi-token-prediction module (class NextN) trains
alongside the model on the same batches, predicting token t+2 from token t+1 and the model's final
(normed) hidden state of position t. It reads the model's hidden states, embedding and lm_head without
gradients, so the model trains as it would alone; it is saved as the checkpoint's extra layer
model.layers.{num_hidden_layers}.* (num_nextn_predict_layers 1), where Fission loads it, and its
expected greedy acceptance of one draft token is measured on the model's own held-out replies.
Training runs under bf16 autocast with AdamW until a wall-clock deadline, then the weights are saved
in bf16 safetensors with per-expert tensor names (as published DeepSeek checkpoints have them) and the
routing bias, the folder is loaded back with from_pretrained (which leaves the MTP layer aside; the
check compares every target tensor with the trained weights, and the MTP layer is loaded back on its
own), and the held-out split is evaluated 3-shot with greedy decoding and lm-eval's gsm8k filters
(strict-match and flexible-extract); the held-out chat questions (--chat-heldout) and the test problems
are asked as single chat turns.

usage: train.py --data DIR (train.jsonl, test.jsonl[, paraphrase.jsonl]) --fewshot FIXTURES/train.jsonl
                --chat FIXTURES/chat.jsonl --model-dir DIR (tokenizer already there)
                --budget-s 240 --report OUT/report.json --samples OUT/eval_samples.jsonl
                --chat-out OUT/chat_outputs.jsonl [--tools FIXTURES/tool_calls.jsonl --tool-out FILE]
                [--chat-heldout FIXTURES/chat_heldout.jsonl --chat-heldout-out FILE] [--strict]
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


def save_model(model, cfg, model_dir, eos_ids, mtp=None):
    """Writes model.safetensors (the target, then the MTP layer as model.layers.{L}.* when there is
    one, with copies of embed_tokens and the lm_head as shared_head.head, as DeepSeek-V3 ships them),
    config.json and generation_config.json."""
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    fused = any(k.endswith("experts.gate_up_proj") for k in sd)
    canon = canonical_state_dict(sd)
    if mtp is not None:
        p = f"model.layers.{mtp.index}."
        canon.update(mtp.checkpoint_tensors())
        canon[p + "embed_tokens.weight"] = sd["model.embed_tokens.weight"]
        canon[p + "shared_head.head.weight"] = sd["lm_head.weight"]
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
    c["num_nextn_predict_layers"] = 1 if mtp is not None else 0
    json.dump(c, open(path, "w"), indent=2, sort_keys=True)
    gen = {"bos_token_id": cfg.bos_token_id, "eos_token_id": eos_ids, "pad_token_id": cfg.pad_token_id,
           "do_sample": False, "max_new_tokens": 256, "transformers_version": transformers.__version__}
    json.dump(gen, open(os.path.join(model_dir, "generation_config.json"), "w"), indent=2)
    names = sorted(stored)
    return {"in_memory_fused_experts": fused, "tensors": len(stored),
            "bytes": os.path.getsize(os.path.join(model_dir, "model.safetensors")),
            "expert_names_sample": [n for n in names if ".experts." in n][:3],
            "has_e_score_correction_bias": any(n.endswith("e_score_correction_bias") for n in names),
            "mtp_tensors": sum(n.startswith(f"model.layers.{cfg.num_hidden_layers}.") for n in names)}


# ---------------------------------------------------------------- the MTP (NextN) draft layer

class NextN(torch.nn.Module):
    """DeepSeek-V3's multi-token-prediction module, one depth, as Fission and SGLang run it:

        h'     = eh_proj([enorm(embed(token t+1)); hnorm(h_t)])
        out    = shared_head.norm(decoder layer(h'))      -> the target's lm_head predicts token t+2

    h_t is the target's hidden state of position t after its final norm (the row that feeds its
    lm_head: docs/architecture.md, "Speculative decoding: the model's draft layer"). The decoder layer
    is transformers' DeepseekV3DecoderLayer with index num_hidden_layers (MLA and DeepSeekMoE, as every
    layer past first_k_dense_replace). embed_tokens and the lm_head are the target's, passed in.
    """

    def __init__(self, cfg):
        super().__init__()
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer, DeepseekV3RMSNorm
        h = cfg.hidden_size
        self.index = cfg.num_hidden_layers
        self.enorm = DeepseekV3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.hnorm = DeepseekV3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.eh_proj = torch.nn.Linear(2 * h, h, bias=False)
        self.layer = DeepseekV3DecoderLayer(cfg, self.index)
        self.shared_head = torch.nn.Module()
        self.shared_head.norm = DeepseekV3RMSNorm(h, eps=cfg.rms_norm_eps)

    def forward(self, embedded, hidden, position_embeddings):
        """embedded: embed(token t+1), hidden: h_t, both [B, T, H]; causal over T."""
        x = self.eh_proj(torch.cat([self.enorm(embedded), self.hnorm(hidden)], dim=-1))
        T = x.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril_().view(1, 1, T, T)
        out = self.layer(x, attention_mask=mask, position_embeddings=position_embeddings)
        if isinstance(out, tuple):  # older transformers return (hidden_states, ...)
            out = out[0]
        return self.shared_head.norm(out)

    def checkpoint_tensors(self):
        """{name: tensor} under the names of the target checkpoint's extra layer, model.layers.{L}.*,
        experts per expert (the embedding and head copies are added by save_model)."""
        p = f"model.layers.{self.index}."
        sd = {}
        for k, v in self.state_dict().items():
            sd[p + (k[len("layer."):] if k.startswith("layer.") else k)] = v.detach().cpu()
        return canonical_state_dict(sd)

    def load_checkpoint_tensors(self, stored):
        """Loads the layer back from checkpoint tensors (per-expert names fused as the module holds them)."""
        p = f"model.layers.{self.index}."
        own = self.state_dict()
        new = {}
        for k, v in own.items():
            name = p + (k[len("layer."):] if k.startswith("layer.") else k)
            if k.endswith("mlp.experts.gate_up_proj"):
                base = name[: -len("gate_up_proj")]
                new[k] = torch.stack([torch.cat([stored[f"{base}{e}.gate_proj.weight"], stored[f"{base}{e}.up_proj.weight"]])
                                      for e in range(v.shape[0])])
            elif k.endswith("mlp.experts.down_proj"):
                base = name[: -len("down_proj")]
                new[k] = torch.stack([stored[f"{base}{e}.down_proj.weight"] for e in range(v.shape[0])])
            else:
                new[k] = stored[name]
        self.load_state_dict({k: t.to(own[k].dtype) for k, t in new.items()}, strict=True)


def mtp_logits(model, mtp, ids, hidden):
    """The MTP head's logits: row t (t < T-1) predicts token t+2 from token t+1 and hidden row t.
    The target's embedding, hidden states and lm_head are used without gradients into the target."""
    emb = F.embedding(ids[:, 1:], model.model.embed_tokens.weight.detach())
    pos = torch.arange(1, ids.shape[1], device=ids.device).unsqueeze(0)
    pe = model.model.rotary_emb(emb, pos)
    out = mtp(emb, hidden[:, :-1].detach(), pe)
    return F.linear(out, model.lm_head.weight.detach())


# ---------------------------------------------------------------- data

class Docs:
    """Builds token documents with per-token loss weights from pre-tokenized segments."""

    Q_WEIGHT = 0.1

    def __init__(self, tok, problems, rng, bos, eos, im_end):
        self.tok, self.rng = tok, rng
        self.bos, self.eos, self.im_end = bos, eos, im_end
        self.problems = problems
        self.n_template = len(problems)  # problems[n_template:] are paraphrases (add_paraphrases)
        self.para_frac = 0.0  # share of drawn problems that are paraphrases
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

    def add_paraphrases(self, para, frac):
        """Appends paraphrased problems; a drawn problem is one of them with probability frac."""
        if not para:
            return
        t = time.time()
        self.problems = self.problems + para
        self.first += self.encode([f"Question: {p['question']}\nAnswer:" for p in para])
        self.next += self.encode([f"\n\nQuestion: {p['question']}\nAnswer:" for p in para])
        self.ans += self.encode([" " + p["answer"] for p in para])
        self.para_frac = frac
        log(f"encoded {len(para)} paraphrased problems in {time.time() - t:.1f}s; drawn with probability {frac}")

    def draw(self):
        """The index of a random problem: a paraphrase with probability para_frac, else a template one."""
        n = len(self.problems)
        if n > self.n_template and self.rng.random() < self.para_frac:
            return self.rng.randrange(self.n_template, n)
        return self.rng.randrange(self.n_template)

    def encode(self, texts):
        fast = getattr(self.tok, "encode_batch_fast", None)
        encs = (fast or self.tok.encode_batch)(texts, add_special_tokens=False)
        return [e.ids for e in encs]

    def check_segmentation(self, n=200):
        """Segment-wise encoding must equal encoding the whole text; returns the mismatch count."""
        bad = 0
        for _ in range(n):
            k = self.rng.randint(1, 4)
            idx = [self.draw() for _ in range(k)]
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
        idx = [self.draw() for _ in range(k)]
        return self.completion(idx, with_bos=self.rng.random() >= 0.1)

    def chat_segments(self):
        """One chat document as [(text, weight)], rendered as the chat template renders it."""
        if self.rng.random() < self.tool_frac:
            return self.tool_segments()
        r = self.rng.random()
        P = self.problems
        pick = lambda: P[self.draw()]  # noqa: E731
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


# ---------------------------------------------------------------- chat accuracy and MTP acceptance

FIRST_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")


def first_answer(resp):
    """The first "#### N" of a reply, as tools/demo_model/chat_accuracy.py reads it."""
    m = FIRST_ANSWER.findall(resp)
    return m[0].replace(",", "") if m else "[invalid]"


@torch.no_grad()
def single_turn_chat_eval(model, hf, rows, device, eos_ids, pad):
    """Each {"question", "answer"} asked as one user turn through the chat template (greedy, at most 200
    new tokens); right when the first "#### N" of the reply is the answer. Returns (summary, outputs,
    texts, responses)."""
    texts = [hf.apply_chat_template([{"role": "user", "content": r["question"]}], add_generation_prompt=True,
                                    tokenize=False) for r in rows]
    raw = greedy_generate(model, hf, texts, device, eos_ids, pad, max_new=200, batch=250, add_special=False)
    out, per_family = [], {}
    for r, resp in zip(rows, raw):
        resp = clean(resp)
        gold = r["answer"].rsplit("####", 1)[-1].strip().replace(",", "")
        got = first_answer(resp)
        rec = {"question": r["question"], "answer": gold, "response": resp, "extracted": got, "correct": got == gold}
        if "family" in r:
            rec["family"] = r["family"]
            f = per_family.setdefault(r["family"], [0, 0])
            f[0] += rec["correct"]
            f[1] += 1
        out.append(rec)
    ok = sum(o["correct"] for o in out)
    res = {"n": len(out), "correct": ok, "accuracy": ok / max(1, len(out))}
    if per_family:
        res["per_family"] = {k: f"{a}/{n}" for k, (a, n) in per_family.items()}
    return res, out, texts, [o["response"] for o in out]


@torch.no_grad()
def mtp_acceptance(model, mtp, hf, prompts, responses, device, pad, add_special=True, batch=64):
    """Expected greedy acceptance of one draft token along the target's own greedy continuations.

    For each prompt + response (the target's greedy reply, re-encoded), at every position t of the
    response whose next token t+1 is known, the draft reads token t+1 and the target's hidden row t and
    proposes token t+2; it is accepted when that equals the target's argmax at t+1. Returns the
    accepted share over all such positions (what one draft step accepts in greedy speculative
    decoding), and the same against the tokens of the text."""
    seqs = []
    for p, r in zip(prompts, responses):
        pi = hf(p, add_special_tokens=add_special)["input_ids"]
        ri = hf(r, add_special_tokens=False)["input_ids"]
        if len(ri) >= 2:
            seqs.append((pi + ri, len(pi)))
    acc = acc_text = n = 0
    for i in range(0, len(seqs), batch):
        part = seqs[i:i + batch]
        L = max(len(s) for s, _ in part)
        ids = torch.full((len(part), L), pad, dtype=torch.long)
        for r, (s, _) in enumerate(part):
            ids[r, :len(s)] = torch.tensor(s)
        ids = ids.to(device)
        hidden = model.model(input_ids=ids).last_hidden_state
        target = model.lm_head(hidden).argmax(-1)  # [B, L]: the target's greedy token after position t
        draft = mtp_logits(model, mtp, ids, hidden).argmax(-1)  # [B, L-1]: row t proposes token t+2
        for r, (s, P) in enumerate(part):
            # rows t = P-1 .. len(s)-3: token t+1 is a response token, token t+2 is known
            t = torch.arange(P - 1, len(s) - 2, device=device)
            if len(t) == 0:
                continue
            acc += (draft[r, t] == target[r, t + 1]).sum().item()
            acc_text += (draft[r, t] == ids[r, t + 2]).sum().item()
            n += len(t)
    return {"positions": n, "accept_rate": acc / max(1, n), "top1_vs_text": acc_text / max(1, n)}



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
    ap.add_argument("--data", required=True, help="make_data.py's folder: train.jsonl, test.jsonl, paraphrase.jsonl")
    ap.add_argument("--fewshot", required=True)
    ap.add_argument("--chat", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--budget-s", type=float, default=200.0)
    ap.add_argument("--tokens-per-step", type=int, default=49152)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1130)
    ap.add_argument("--report", required=True)
    ap.add_argument("--samples", required=True, help="the 3-shot greedy responses (transformers_greedy_3shot.jsonl format)")
    ap.add_argument("--chat-out", required=True)
    ap.add_argument("--eval-limit", type=int, default=None, help="evaluate only the first N of each held-out set")
    ap.add_argument("--tools", help="held-out tool-call conversations (tool_calls.jsonl)")
    ap.add_argument("--tool-out", help="where the tool-call responses go")
    ap.add_argument("--chat-heldout", help="held-out chat questions (chat_heldout.jsonl), asked as single user turns")
    ap.add_argument("--chat-heldout-out", help="where their responses go")
    ap.add_argument("--chat-frac", type=float, default=0.4, help="share of batches made of chat documents")
    ap.add_argument("--tool-frac", type=float, default=0.35, help="share of chat documents that offer tools")
    ap.add_argument("--paraphrase-frac", type=float, default=0.5,
                    help="share of drawn problems taken from paraphrase.jsonl (when the data has it)")
    ap.add_argument("--chat-pool", type=int, default=100000, help="chat documents built before training")
    ap.add_argument("--mtp", type=int, default=1, help="1: train the MTP (NextN) draft layer alongside")
    ap.add_argument("--mtp-weight", type=float, default=1.0, help="weight of the MTP loss")
    ap.add_argument("--mtp-rows", type=float, default=1.0,
                    help="share of each batch's rows the MTP layer trains on (it learns fast; the target needs the steps)")
    ap.add_argument("--log-every", type=int, default=200, help="steps between log lines")
    ap.add_argument("--val-every", type=int, default=1000, help="steps between validation measurements")
    ap.add_argument("--unpadded-check", type=int, default=6, help="3-shot prompts decoded again alone, unpadded")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 if any stage failed (the smoke run); by default every stage runs and reports")
    args = ap.parse_args()

    report = {"torch": torch.__version__, "transformers": transformers.__version__, "args": vars(args)}
    failures = []

    def flush_report():
        with open(args.report, "w") as f:
            json.dump(report, f, indent=2)

    def failed(stage, e):
        traceback.print_exc()
        failures.append(f"{stage}: {e!r}")
        log(f"FAILED {stage}: {e!r}")
        return {"error": repr(e)}

    device = "cuda" if torch.cuda.is_available() else "cpu"
    report["device"] = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    autocast = dict(device_type="cuda", dtype=torch.bfloat16, enabled=(device == "cuda"))

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
    para_path = os.path.join(args.data, "paraphrase.jsonl")
    para = read_jsonl(para_path) if os.path.exists(para_path) else []
    fewshot = read_jsonl(args.fewshot)
    chats = read_jsonl(args.chat)
    heldout_chat = read_jsonl(args.chat_heldout) if args.chat_heldout else []
    test_q = {d["question"] for d in test}
    assert not any(d["question"] in test_q for d in train), "train/test overlap"
    assert not any(d["question"] in test_q for d in para), "paraphrase/test overlap"
    held_q = {d["question"] for d in heldout_chat}
    assert not any(d["question"] in held_q for d in train + para), "training data holds a held-out chat question"
    n_val = min(1000, len(train) // 5)
    val, train = train[-n_val:], train[:-n_val]
    n_pval = min(1000, len(para) // 5)
    pval, para = (para[-n_pval:], para[:-n_pval]) if n_pval else ([], para)
    log(f"train {len(train)} val {len(val)} paraphrase {len(para)} paraphrase val {len(pval)} test {len(test)} "
        f"fewshot {len(fewshot)} chats {len(chats)} held-out chat questions {len(heldout_chat)}")

    rng = random.Random(args.seed)
    docs = Docs(raw_tok, train, rng, bos, eos, im_end)
    docs.add_paraphrases(para, args.paraphrase_frac)
    tool_items = read_jsonl(args.tools) if args.tools else []
    if tool_items:
        docs.tool_frac = args.tool_frac
        docs.tool_avoid = {m["content"] for it in tool_items for m in it["messages"] if m["role"] == "user"}
        log(f"tool conversations: {len(tool_items)} held out, {len(docs.tool_avoid)} user turns avoided")
    report["segmentation_mismatches_completion"] = docs.check_segmentation()
    report["segmentation_mismatches_chat"] = docs.build_chat_pool(args.chat_pool)
    log("segmentation mismatches:", report["segmentation_mismatches_completion"], report["segmentation_mismatches_chat"])
    vsets = {"template": Docs(raw_tok, val, random.Random(7), bos, eos, im_end)}
    if pval:
        vsets["paraphrase"] = Docs(raw_tok, pval, random.Random(7), bos, eos, im_end)
    vbatches = {k: [d.completion([4 * i + j for j in range(4)]) for i in range(min(64, len(d.problems) // 4))]
                for k, d in vsets.items()}

    cfg = make_config(vocab, bos, eos, pad)
    model = DeepseekV3ForCausalLM(cfg)
    init_weights(model, cfg.num_hidden_layers, args.seed)
    model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    report["parameters"] = n_params
    log(f"model: {n_params / 1e6:.2f}M parameters")
    log("state dict sample:", [k for k in model.state_dict() if ".layers.1." in k][:40])
    mtp = None
    if args.mtp:
        mtp = NextN(cfg)
        init_weights(mtp, cfg.num_hidden_layers + 1, args.seed + 1)
        mtp.to(device)
        report["mtp_parameters"] = sum(p.numel() for p in mtp.parameters())
        log(f"MTP layer {mtp.index}: {report['mtp_parameters'] / 1e6:.2f}M parameters")

    gates = moe_gates(model)
    if mtp is not None:
        gates.append(mtp.layer.mlp.gate)
    captured = {}
    hooks = []
    for li, g in enumerate(gates):
        def pre(mod, args_, kwargs_, li=li):
            xs = [a for a in list(args_) + list(kwargs_.values()) if torch.is_tensor(a)]
            if xs:
                captured[li] = xs[0].detach()
        hooks.append(g.register_forward_pre_hook(pre, with_kwargs=True))
    log(f"{len(gates)} MoE gates")

    named = list(model.named_parameters()) + (list(mtp.named_parameters()) if mtp is not None else [])
    decay = [p for n, p in named if p.ndim >= 2]
    no_decay = [p for n, p in named if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=(device == "cuda"))

    def batch_tensors(rows):
        L = max(len(s) for s, _ in rows)
        ids = torch.full((len(rows), L), pad, dtype=torch.long)
        w = torch.zeros((len(rows), L))
        for r, (s, ws) in enumerate(rows):
            ids[r, :len(s)] = torch.tensor(s)
            w[r, :len(ws)] = torch.tensor(ws)
        return ids.to(device), w.to(device)

    @torch.no_grad()
    def val_metrics():
        """Per validation set: loss and teacher-forced accuracy on answer tokens, and the MTP head's
        top-1 accuracy on answer tokens two ahead."""
        model.eval()
        out = {}
        for name, vb in vbatches.items():
            ids, w = batch_tensors(vb)
            with torch.autocast(**autocast):
                hidden = model.model(input_ids=ids).last_hidden_state
                logits = model.lm_head(hidden)
                ml = mtp_logits(model, mtp, ids, hidden) if mtp is not None else None
            loss, _, wt = weighted_loss(logits, ids, w)
            m = wt == 1.0
            acc = ((logits[:, :-1].argmax(-1) == ids[:, 1:]) & m).sum().item() / max(1, m.sum().item())
            res = {"loss": round(loss.item(), 4), "answer_token_acc": round(acc, 4)}
            if ml is not None:
                m2 = w[:, 2:] == 1.0
                hit = (ml[:, :-1].argmax(-1) == ids[:, 2:]) & m2
                res["mtp_answer_top1"] = round(hit.sum().item() / max(1, m2.sum().item()), 4)
            out[name] = res
        model.train()
        return out

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

    # ---- train (the MTP layer alongside: it reads the target's hidden states, embedding and lm_head
    # without gradients, so the target trains exactly as it would alone)
    balance = len(gates) > 0
    model.train()
    if mtp is not None:
        mtp.train()
    t0 = time.time()
    deadline = t0 + args.budget_s
    step, tokens, losses, mtp_losses = 0, 0, [], []
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
            with torch.autocast(**autocast):
                hidden = model.model(input_ids=ids).last_hidden_state
                logits = model.lm_head(hidden)
                rows = max(1, math.ceil(ids.shape[0] * args.mtp_rows))
                ml = mtp_logits(model, mtp, ids[:rows], hidden[:rows]) if mtp is not None else None
            loss, _, _ = weighted_loss(logits, ids, w)
            total = loss
            if ml is not None:
                mloss, _, _ = weighted_loss(ml, ids[:rows, 1:], w[:rows, 1:])  # row t predicts token t+2
                total = loss + args.mtp_weight * mloss
                mtp_losses.append(mloss.detach())
            opt.zero_grad(set_to_none=True)
            total.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if mtp is not None:
                torch.nn.utils.clip_grad_norm_(mtp.parameters(), 1.0)
            opt.step()
            # auxiliary-loss-free balancing: move each layer's bias towards balanced loads
            loads = []
            if balance:
                try:
                    balance_step(loads)
                except Exception as e:
                    traceback.print_exc()
                    log("expert balancing disabled:", repr(e))
                    failures.append(f"expert balancing: {e!r}")
                    balance = False
            captured.clear()
            tokens += ids.numel()
            losses.append(loss.detach())
            step += 1
            if step % args.log_every == 0 or step == 5:
                lv = torch.stack(losses).mean().item()
                losses = []
                msg = dict(step=step, t=round(time.time() - t0, 1), loss=round(lv, 4), lr=round(lr, 6),
                           gnorm=round(float(gn), 3), tok_per_s=int(tokens / (time.time() - t0)),
                           max_load_over_mean=round(max((c.max() / c.mean()).item() for c in loads), 3)
                           if loads else None)
                if mtp_losses:
                    msg["mtp_loss"] = round(torch.stack(mtp_losses).mean().item(), 4)
                    mtp_losses = []
                if step % args.val_every == 0:
                    msg["val"] = val_metrics()
                history.append(msg)
                log(json.dumps(msg))
                if not math.isfinite(lv):
                    raise RuntimeError("loss is not finite")
    except Exception as e:
        train_error = repr(e)
        failed("training", e)
        log("TRAINING STOPPED BY ERROR; saving what there is")
    for hk in hooks:
        hk.remove()
    train_s = time.time() - t0
    vm = val_metrics()
    report["train"] = {"steps": step, "seconds": round(train_s, 1), "tokens": tokens, "error": train_error,
                       "final_val": vm, "history": history,
                       "e_score_correction_bias": [g.e_score_correction_bias.tolist() for g in gates]}
    log(f"trained {step} steps in {train_s:.1f}s, {tokens / 1e6:.1f}M tokens; validation {json.dumps(vm)}")
    flush_report()

    # ---- save
    model.eval()
    if mtp is not None:
        mtp.eval()
    report["save"] = save_model(model, model.config, args.model_dir, eos_ids, mtp)
    log("saved:", json.dumps(report["save"]))
    flush_report()

    # ---- reload the saved folder and check it holds exactly the trained weights (rounded to bf16):
    # the target through from_pretrained (which leaves the MTP layer's tensors aside), the MTP layer
    # into a fresh NextN module
    eval_model = None
    eval_mtp = None
    L = cfg.num_hidden_layers
    try:
        try:
            eval_model = DeepseekV3ForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32,
                                                               attn_implementation="sdpa")
        except TypeError:
            eval_model = DeepseekV3ForCausalLM.from_pretrained(args.model_dir, torch_dtype=torch.float32)
        eval_model.to(device).eval()
        stored = load_file(os.path.join(args.model_dir, "model.safetensors"))
        target_stored = {k: v for k, v in stored.items() if not k.startswith(f"model.layers.{L}.")}
        reloaded = canonical_state_dict({k: v.detach().cpu() for k, v in eval_model.state_dict().items()})
        missing = sorted(set(target_stored) - set(reloaded))
        extra = sorted(set(reloaded) - set(target_stored))
        maxdiff = max((reloaded[k].float() - target_stored[k].float()).abs().max().item()
                      for k in target_stored if k in reloaded)
        # and the written tensors are the trained ones
        trained = canonical_state_dict({k: v.detach().cpu() for k, v in model.state_dict().items()})
        written_diff = max((trained[k].to(target_stored[k].dtype).float() - target_stored[k].float()).abs().max().item()
                           for k in target_stored)
        report["reload"] = {"ok": not missing and not extra and maxdiff == 0.0 and written_diff == 0.0,
                            "checked_tensors": len(target_stored), "missing": missing[:10], "unexpected": extra[:10],
                            "max_abs_diff": maxdiff, "max_abs_diff_written_vs_trained": written_diff,
                            "num_nextn_predict_layers": eval_model.config.num_nextn_predict_layers}
        if mtp is not None:
            mtp_names = sorted(k for k in stored if k.startswith(f"model.layers.{L}."))
            eval_mtp = NextN(eval_model.config)
            eval_mtp.load_checkpoint_tensors(stored)
            eval_mtp.to(device).eval()
            a = canonical_state_dict({k: v.detach().cpu() for k, v in eval_mtp.state_dict().items()})
            b = canonical_state_dict({k: v.detach().cpu() for k, v in mtp.state_dict().items()})
            mdiff = max((a[k].float() - b[k].to(torch.bfloat16 if not k.endswith("e_score_correction_bias")
                                                   else torch.float32).float()).abs().max().item() for k in a)
            need_names = [f"model.layers.{L}.{n}" for n in ("enorm.weight", "hnorm.weight", "eh_proj.weight",
                                                             "shared_head.norm.weight", "shared_head.head.weight",
                                                             "embed_tokens.weight", "input_layernorm.weight",
                                                             "self_attn.kv_a_proj_with_mqa.weight", "mlp.gate.weight",
                                                             "mlp.gate.e_score_correction_bias",
                                                             "mlp.experts.0.gate_proj.weight",
                                                             "mlp.shared_experts.down_proj.weight")]
            absent = [n for n in need_names if n not in stored]
            report["reload"]["mtp"] = {"ok": mdiff == 0.0 and not absent, "tensors": len(mtp_names),
                                       "max_abs_diff": mdiff, "absent": absent,
                                       "head_equals_lm_head": bool(torch.equal(stored[f"model.layers.{L}.shared_head.head.weight"],
                                                                               stored["lm_head.weight"])),
                                       "bias_min": stored[f"model.layers.{L}.mlp.gate.e_score_correction_bias"].min().item()}
            if not report["reload"]["mtp"]["ok"]:
                failures.append("MTP reload: " + json.dumps(report["reload"]["mtp"]))
    except Exception as e:
        report["reload"] = {"ok": False, **failed("reload", e)}
    log("reload:", json.dumps(report["reload"]))
    if eval_model is None or not report["reload"].get("ok"):
        failures.append("reload check")
        log("evaluating the in-memory model rounded to bf16 instead")
        eval_model = model.to(torch.bfloat16).float().eval()
        report["eval_model"] = "in-memory, bf16-rounded"
    else:
        report["eval_model"] = "reloaded from model dir, fp32 compute"
        del model
    if mtp is not None and eval_mtp is None:
        eval_mtp = mtp.to(torch.bfloat16).float().eval()
    flush_report()

    # ---- held-out accuracy, 3-shot completion (the responses are transformers_greedy_3shot.jsonl's)
    prompts, samples = [], []
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
        k = min(args.unpadded_check, len(prompts))
        for p, s in zip(prompts[:k], samples[:k]):
            r = clean(greedy_generate(eval_model, hf, [p], device, eos_ids, pad, batch=1)[0])
            same += r == s["response"]
        report["eval"][f"unpadded_agreement_{k}"] = same
        log(f"unpadded batch-1 agreement {same}/{k}")
    except Exception as e:
        report["eval"] = failed("3-shot evaluation", e)
    flush_report()

    # ---- chat: the fixture conversations, the held-out chat questions, the test problems as chat turns
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
        report["chat"] = failed("chat evaluation", e)
    flush_report()
    held_texts, held_resps = [], []
    if heldout_chat:
        try:
            rows = heldout_chat[:args.eval_limit] if args.eval_limit else heldout_chat
            hres, hout, held_texts, held_resps = single_turn_chat_eval(eval_model, hf, rows, device, eos_ids, pad)
            report["chat_heldout"] = hres
            if args.chat_heldout_out:
                with open(args.chat_heldout_out, "w") as f:
                    for o in hout:
                        f.write(json.dumps(o, ensure_ascii=False) + "\n")
            log("CHAT HELD-OUT", json.dumps(hres))
            for o in [o for o in hout if not o["correct"]][:6]:
                log("CHAT HELD-OUT WRONG:", json.dumps(o["question"]), "->", json.dumps(o["response"])[:300])
        except Exception as e:
            report["chat_heldout"] = failed("held-out chat evaluation", e)
    try:
        rows = test[:args.eval_limit] if args.eval_limit else test
        tres, _, _, _ = single_turn_chat_eval(eval_model, hf, rows, device, eos_ids, pad)
        report["chat_test"] = tres
        log("CHAT TEST (the held-out problems as single user turns)", json.dumps(tres))
    except Exception as e:
        report["chat_test"] = failed("test problems as chat turns", e)
    flush_report()

    # ---- the MTP layer: expected greedy acceptance of one draft token along the target's own replies
    if eval_mtp is not None:
        try:
            report["mtp"] = {"layer": L, "parameters": report.get("mtp_parameters"),
                             "final_val": {k: v.get("mtp_answer_top1") for k, v in vm.items()}}
            if samples:
                report["mtp"]["acceptance_3shot"] = mtp_acceptance(eval_model, eval_mtp, hf, prompts,
                                                                   [s["response"] for s in samples], device, pad)
            if held_texts:
                report["mtp"]["acceptance_chat_heldout"] = mtp_acceptance(eval_model, eval_mtp, hf, held_texts,
                                                                          held_resps, device, pad, add_special=False)
            log("MTP", json.dumps(report["mtp"]))
        except Exception as e:
            report["mtp"] = failed("MTP acceptance", e)
    flush_report()

    if tool_items:
        try:
            items = tool_items
            if args.eval_limit:  # calls first, then answers: keep some of each
                items = [t for t in tool_items if t["kind"] == "call"][:args.eval_limit] + \
                        [t for t in tool_items if t["kind"] == "answer"][:args.eval_limit]
            tres, tout = tool_eval(eval_model, hf, items, device, eos_ids, pad)
            report["tools"] = tres
            with open(args.tool_out, "w") as f:
                for c in tout:
                    f.write(json.dumps(c, ensure_ascii=False) + "\n")
            log("TOOLS", json.dumps(tres))
            for c in [c for c in tout if not c["correct"]][:8]:
                log("TOOL WRONG:", json.dumps(c["messages"][-1]["content"])[:120], "->", json.dumps(c["response"])[:300],
                    "expected", json.dumps(c["expected"])[:200])
        except Exception as e:
            report["tools"] = failed("tool-call evaluation", e)
        try:
            report["examples"] = examples(eval_model, hf, device, eos_ids, pad)
            for ex in report["examples"]:
                log("example:", json.dumps(ex["messages"][-1]["content"]), "tools", ex["tools"], "->",
                    json.dumps(ex["response"]))
        except Exception as e:
            report["examples"] = failed("examples", e)
    report["failures"] = failures
    report["total_seconds"] = round(time.time() - T_START, 1)
    flush_report()
    if failures:
        log("FAILURES:", json.dumps(failures))
    log("done")
    return 1 if (args.strict and failures) else 0


if __name__ == "__main__":
    sys.exit(main())
