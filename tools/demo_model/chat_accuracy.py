#!/usr/bin/env python3
"""Chat accuracy of a served model on questions with known answers: each question is sent as one
user turn to /v1/chat/completions (greedy, at most 200 new tokens) and the first "#### N" of the
reply is compared with the answer. Prints "correct / total" and the first misses.

Questions come from a JSON-lines file of {"question", "answer"}, where the answer is a number or a
gsm8k solution ending in "#### N" (tests/fixtures/demo/test.jsonl, chat_heldout.jsonl).

Pure python, no dependencies. usage: chat_accuracy.py --base-url http://127.0.0.1:30000 FILE
                                                     [--model demo] [--limit N] [--concurrency 8]
"""
import argparse
import concurrent.futures
import json
import re
import sys
import urllib.request


def ask(base_url, model, question):
    body = json.dumps({"model": model, "temperature": 0, "max_tokens": 200,
                       "messages": [{"role": "user", "content": question}]}).encode()
    req = urllib.request.Request(base_url + "/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)["choices"][0]["message"]["content"]


def gold(answer):
    return answer.rsplit("####", 1)[-1].strip().replace(",", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--base-url", default="http://127.0.0.1:30000")
    ap.add_argument("--model", default="demo")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    with open(args.file, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()][:args.limit]
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        replies = list(pool.map(lambda r: ask(args.base_url, args.model, r["question"]), rows))
    misses = []
    for row, reply in zip(rows, replies):
        found = re.findall(r"#### (\-?[0-9\.\,]+)", reply)
        if not found or found[0].replace(",", "") != gold(row["answer"]):
            misses.append((row["question"], reply))
    print(f"{len(rows) - len(misses)} / {len(rows)}")
    for question, reply in misses[:5]:
        print(f"- {question}\n  {reply!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
