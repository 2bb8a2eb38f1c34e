#!/usr/bin/env python3
"""Greedy-generation prompts for the GPU checks: JSON lines of random token ids below the model's
vocabulary (fixed seed), of lengths 5, 37, MID and one over the 512-token context-parallel
threshold, each length capped by the model's context.

  usage: prompts.py MODEL_DIR [MID]   (MID default 300)
"""
import json
import random
import sys

config = json.load(open(sys.argv[1] + "/config.json"))
mid = int(sys.argv[2]) if len(sys.argv) > 2 else 300
vocab, context = config["vocab_size"], config["max_position_embeddings"]
rng = random.Random(7)
for n in (5, 37, min(mid, context // 2), min(777, context - 40)):
    ids = [rng.randrange(3, vocab) for _ in range(n)]
    print(json.dumps({"input_ids": ids, "sampling_params": {"max_new_tokens": 24, "ignore_eos": True}}))
