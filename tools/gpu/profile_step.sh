#!/usr/bin/env bash
# Where the time of prefill and decode steps goes (a measurement): `fission generate` on the
# serving benchmark's model (DeepSeek-V3 dimensions, 4 layers, dummy FP8 weights, one GPU) with
# 1 and with 64 prompts of 1024 tokens and 64 greedy tokens each: first untimed (the prefill and
# decode lines give step rates), then with FISSION_CUDA_OP_TIMING=1 (src/kernels/cuda/op_timer.h),
# which prints each Backend operation's share of the device time. Log: $OUT/profile.log.
#
#   usage: bash tools/gpu/profile_step.sh BINDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
LOG=$OUT/profile.log
: > "$LOG"
for batch in 1 64; do
  python3 - "$batch" > /tmp/profile_prompts.jsonl <<'PY'
import json, random, sys
r = random.Random(3)
for _ in range(int(sys.argv[1])):
    print(json.dumps({"input_ids": [r.randrange(3, 129000) for _ in range(1024)],
                      "sampling_params": {"max_new_tokens": 64, "ignore_eos": True}}))
PY
  cmd=("$BIN/fission" generate --model-path bench/configs/deepseek-v3 --load-format dummy
       --json-model-override-args '{"num_hidden_layers": 4, "first_k_dense_replace": 1}' --device cuda
       --dtype bfloat16 --max-total-tokens 131072 --max-running-requests 64 --input /tmp/profile_prompts.jsonl)
  "${cmd[@]}" > /dev/null 2> /tmp/profile_plain.log
  echo "== batch $batch, untimed: $(grep -E '^(prefill|decode)' /tmp/profile_plain.log | tr '\n' ' ')" | tee -a "$LOG"
  # Per-operation timing needs eager steps (a graph replay is one launch).
  FISSION_CUDA_OP_TIMING=1 "${cmd[@]}" --disable-cuda-graph > /dev/null 2> /tmp/profile_timed.log
  echo "== batch $batch, timed: $(grep -E '^(prefill|decode)' /tmp/profile_timed.log | tr '\n' ' ')" | tee -a "$LOG"
  sed -n '/CUDA op timing/,$p' /tmp/profile_timed.log | head -40 | tee -a "$LOG"
done
