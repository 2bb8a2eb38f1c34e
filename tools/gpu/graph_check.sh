#!/usr/bin/env bash
# CUDA graphs on the device: the CudaGraphs model tests (replays against eager steps, bit-identical
# at captured sizes), then `fission generate` greedy ids with graphs against --disable-cuda-graph on
# the serving benchmark's model (DeepSeek-V3 dimensions, 4 layers, dummy FP8 weights), one GPU and
# --tp-size 2, with the decode step rate of each. Logs and graph_summary.txt go to $OUT.
#
#   usage: bash tools/gpu/graph_check.sh BINDIR     exit status 0 when every comparison holds
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
export NCCL_NVLS_ENABLE=0
SUMMARY=$OUT/graph_summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
STATUS=0
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

timeout 200 "$BIN/tests/fission_model_cuda_tests" --gtest_filter='CudaGraphs.*' > "$OUT/graph_tests.log" 2>&1
rc=$?
note "CudaGraphs tests: rc $rc"
grep -E "^\[  (FAILED|PASSED|  OK|SKIPPED)|cuda graphs vs eager|Failure|Expected|Which is|row " "$OUT/graph_tests.log" | head -40 \
  >> "$SUMMARY"
(( rc == 0 )) || STATUS=1

python3 - > "$OUT/graph_prompts.jsonl" <<'PY'
import json, random
r = random.Random(5)
for n in (7, 100, 513, 1024, 40, 3000, 260, 64):
    print(json.dumps({"input_ids": [r.randrange(3, 129000) for _ in range(n)],
                      "sampling_params": {"max_new_tokens": 48, "ignore_eos": True}}))
PY
gen() {  # gen NAME ARGS...
  local name=$1; shift
  timeout 300 "$BIN/fission" generate --model-path bench/configs/deepseek-v3 --load-format dummy \
    --json-model-override-args '{"num_hidden_layers": 4, "first_k_dense_replace": 1}' --device cuda \
    --dtype bfloat16 --max-total-tokens 65536 --input "$OUT/graph_prompts.jsonl" "$@" \
    > "$OUT/gen_$name.out" 2> "$OUT/gen_$name.err"
  note "  $name: rc $? $(grep -E '^(prefill|decode)' "$OUT/gen_$name.err" | tr '\n' ' ')"
  grep -iE "graph|error" "$OUT/gen_$name.err" | head -5 >> "$SUMMARY"
}
same() {  # same A B
  if cmp -s "$OUT/gen_$1.out" "$OUT/gen_$2.out" && [[ -s $OUT/gen_$1.out ]]; then
    note "  $1: identical ids to $2"
  else
    note "  $1: DIFFERENT from $2 (FAIL)"
    STATUS=1
  fi
}
note "generate, 8 prompts of 7..3000 tokens, 48 greedy tokens each:"
gen eager --disable-cuda-graph
gen graphs
# Batches of 8, 7, ... as prompts finish: the captured sizes only.
gen graphs_exact --cuda-graph-bs 1 2 3 4 5 6 7 8
same graphs_exact eager
if (( GPUS >= 2 )); then
  gen tp2_eager --tp-size 2 --disable-cuda-graph
  gen tp2_graphs --tp-size 2 --cuda-graph-bs 1 2 3 4 5 6 7 8
  same tp2_graphs tp2_eager
fi
note "graph_check: $([[ $STATUS == 0 ]] && echo passed || echo FAILED)"
exit $STATUS
