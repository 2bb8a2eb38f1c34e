#!/usr/bin/env python3
"""Single-thread encode throughput of the Rust `tokenizers` library on the tokenizer corpus.

The same corpus as bench/tokenizer_encode_bench.cc (corpus.jsonl plus the first gsm8k test rows),
encoded one string at a time without special tokens, so the two numbers compare directly.

Usage: tokenizer_bench_reference.py --tokenizer-dir NAME=DIR [...] --gsm8k-dir DIR [--repeat 5]
"""
import argparse
import json
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "fixtures", "tokenizer", "corpus.jsonl"))
GSM8K_ROWS = 700


def load(gsm8k_dir):
    with open(CORPUS, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f]
    with open(os.path.join(gsm8k_dir, "test.jsonl"), encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n >= GSM8K_ROWS:
                break
            row = json.loads(line)
            texts += [row["question"], row["answer"]]
    return texts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer-dir", action="append", required=True, metavar="NAME=DIR")
    parser.add_argument("--gsm8k-dir", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import tokenizers
    texts = load(args.gsm8k_dir)
    total_bytes = sum(len(t.encode("utf-8")) for t in texts)
    for spec in args.tokenizer_dir:
        name, _, directory = spec.partition("=")
        tok = tokenizers.Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
        for t in texts[:50]:  # warm-up
            tok.encode(t, add_special_tokens=False)
        best = None
        for _ in range(args.repeat):
            start = time.perf_counter()
            n_ids = 0
            for t in texts:
                n_ids += len(tok.encode(t, add_special_tokens=False).ids)
            elapsed = time.perf_counter() - start
            best = elapsed if best is None else min(best, elapsed)
        # One call for the whole corpus (RAYON_NUM_THREADS=1 keeps it on one thread): the same work
        # with the Python call overhead amortized.
        best_batch = None
        for _ in range(args.repeat):
            start = time.perf_counter()
            tok.encode_batch(texts, add_special_tokens=False)
            elapsed = time.perf_counter() - start
            best_batch = elapsed if best_batch is None else min(best_batch, elapsed)
        print(json.dumps({"tokenizer": name, "library": f"tokenizers {tokenizers.__version__}",
                          "strings": len(texts), "bytes": total_bytes, "ids": n_ids,
                          "best_seconds": round(best, 4), "mb_per_s": round(total_bytes / best / 1e6, 2),
                          "batch_best_seconds": round(best_batch, 4),
                          "batch_mb_per_s": round(total_bytes / best_batch / 1e6, 2)}))


if __name__ == "__main__":
    main()
