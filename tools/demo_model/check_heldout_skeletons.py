#!/usr/bin/env python3
"""Checks that the held-out chat questions stay held out: no training question has the skeleton of a
held-out one.

A skeleton is a question's wording alone (paraphrase.skeleton): lower case, with names, pronouns,
objects, containers, groups and numbers replaced by placeholders, so "Tom has 3 apples." and "Anna
has 12 stickers." are the same skeleton. The training questions checked are every question the
training can see: the template problems (train.jsonl), the paraphrased problems (paraphrase.jsonl)
and the user turns of the tool-call conversations that train.py draws (sampled here from the same
generator). Exits 1 if any held-out skeleton occurs among them.

It also reports, for information, how many held-out questions have each of their sentences
somewhere in the training questions (sentence skeletons): the held-out wording is new as a whole,
and this says how much of it is new sentence by sentence.

Without --data the training files are generated in memory with the sizes of the GPU run.

Pure python, no dependencies.
usage: check_heldout_skeletons.py [--heldout tests/fixtures/demo/chat_heldout.jsonl] [--data DIR]
                                  [--train-size 300000] [--paraphrase-size 150000] [--tool-samples 100000]
"""
import argparse
import collections
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_data as md  # noqa: E402
from paraphrase import sentence_skeletons, skeleton  # noqa: E402


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heldout", default=os.path.join(HERE, "..", "..", "tests", "fixtures", "demo", "chat_heldout.jsonl"))
    ap.add_argument("--data", help="a make_data.py output folder (train.jsonl, paraphrase.jsonl)")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--train-size", type=int, default=300000)
    ap.add_argument("--paraphrase-size", type=int, default=150000)
    ap.add_argument("--tool-samples", type=int, default=100000, help="tool-call conversations to sample")
    args = ap.parse_args()

    heldout = read_jsonl(args.heldout)
    sources = {}
    dropped = None
    if args.data:
        sources["train.jsonl"] = [r["question"] for r in read_jsonl(os.path.join(args.data, "train.jsonl"))]
        para = os.path.join(args.data, "paraphrase.jsonl")
        sources["paraphrase.jsonl"] = [r["question"] for r in read_jsonl(para)] if os.path.exists(para) else []
    else:
        test, train = md.generate(args.seed, 500, args.train_size)
        sources["train (template stream)"] = [r["question"] for r in train]
        avoid = md.heldout_skeletons(args.heldout)
        seen = {p["question"] for p in test} | {p["question"] for p in train}
        para, dropped = md.generate_paraphrases(args.seed, args.paraphrase_size, seen, avoid)
        sources["paraphrase stream"] = [r["question"] for r in para]
    rng = random.Random(1)
    tool_users = []
    for _ in range(args.tool_samples):
        _, msgs, _, _ = md.make_tool_conversation(rng)
        tool_users += [m["content"] for m in msgs if m["role"] == "user"]
    sources["tool-call user turns (sampled)"] = tool_users
    sources["greetings and system prompts"] = [u for u, _ in md.GREETINGS] + list(md.SYSTEM_PROMPTS)

    held = collections.defaultdict(list)
    for r in heldout:
        held[skeleton(r["question"])].append(r)
    print(f"held-out: {len(heldout)} questions, {len(held)} distinct skeletons ({args.heldout})")
    overlaps = 0
    train_sentences = set()
    template_sentences = set()  # without the paraphrases: what the earlier training data already had
    for name, questions in sources.items():
        skels = set()
        for q in questions:
            skels.add(skeleton(q))
            ss = sentence_skeletons(q)
            train_sentences.update(ss)
            if "paraphrase" not in name:
                template_sentences.update(ss)
        hits = [s for s in held if s in skels]
        overlaps += len(hits)
        print(f"{name}: {len(questions)} questions, {len(skels)} distinct skeletons, "
              f"held-out skeletons among them: {len(hits)}")
        for s in hits:
            print("  OVERLAP:", s, "e.g.", held[s][0]["question"])
    if dropped is not None:
        print(f"paraphrases dropped by make_data.py's decontamination filter: {dropped}")

    print("sentence by sentence (information): held-out questions whose every sentence skeleton occurs "
          "in some training question, per family")
    print("  (in brackets: the same without the paraphrases)")
    per_family = collections.defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    for r in heldout:
        sents = sentence_skeletons(r["question"])
        seen_n = sum(s in train_sentences for s in sents)
        seen_t = sum(s in template_sentences for s in sents)
        f = per_family[r.get("family", "?")]
        f[0] += 1
        f[1] += seen_n == len(sents)
        f[2] += seen_t == len(sents)
        f[3] += seen_n
        f[4] += seen_t
        f[5] += len(sents)
    for fam, (n, all_seen, all_t, s_seen, s_t, s_all) in per_family.items():
        print(f"  {fam:22s} {all_seen:3d} [{all_t:3d}] / {n} questions; sentences seen {s_seen} [{s_t}] / {s_all}")
    if overlaps:
        print(f"FAIL: {overlaps} held-out skeletons occur in the training questions")
        return 1
    print("OK: no held-out skeleton occurs in the training questions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
