#!/usr/bin/env bash
# Speculative decoding's TPOT on one GPU (a measurement, not a test): `fission generate` on
# DeepSeek-V3's real dimensions with few layers and its NextN layer (dummy weights drawn on the
# device; the config's num_nextn_predict_layers 1 gives the draft layer index LAYERS), batch 1 and
# 16, with no speculation, NEXTN 1 step and NEXTN 3 steps. Dummy drafts are never accepted, so
# the NEXTN runs pass --speculative-accept-all-for-benchmark: every draft is kept (outputs are not
# the model's), the step a trained layer with full acceptance would run. Each point runs with
# CUDA graphs (sizes 1 and 16) and eagerly (--disable-cuda-graph) as the reference; the greedy ids
# of the two must be identical. Prints a table next to the byte roofline of a step per token
# (tools/gpu/roofline.py). Logs and spec_bench.txt go to $OUT. About 12 short runs (~2-3 min).
#
#   usage: bash tools/gpu/spec_bench.sh BINDIR [LAYERS]     exit status 0 when all ids agree
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
LAYERS=${2:-4}
export NCCL_NVLS_ENABLE=0
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${NCCL_DIR:-}:${LD_LIBRARY_PATH:-}
MODEL=bench/configs/deepseek-v3
OVERRIDE="{\"num_hidden_layers\": $LAYERS, \"first_k_dense_replace\": 1}"
INPUT=256
OUTPUT=129  # 128 decode tokens after the prefill's
SUMMARY=$OUT/spec_bench.txt
STATUS=0
note() { echo "$*" | tee -a "$SUMMARY"; }
: > "$SUMMARY"
note "DeepSeek-V3 dims, $LAYERS layers + NextN, dummy FP8 weights, input $INPUT, output $OUTPUT, $(date -u +%F)"

prompts() {  # prompts BATCH > FILE: BATCH random prompts of INPUT ids
  python3 - "$1" "$INPUT" "$OUTPUT" <<'PY'
import json, random, sys
batch, n, out = map(int, sys.argv[1:])
r = random.Random(7)
for _ in range(batch):
    print(json.dumps({"input_ids": [r.randrange(3, 129000) for _ in range(n)],
                      "sampling_params": {"max_new_tokens": out, "ignore_eos": True}}))
PY
}

spec_flags() {  # spec_flags STEPS: the flags of NEXTN with STEPS drafts, accepting all (0: none)
  (( $1 == 0 )) && return
  echo "--speculative-algorithm NEXTN --speculative-num-steps $1 --speculative-eagle-topk 1" \
       "--speculative-num-draft-tokens $(( $1 + 1 )) --speculative-accept-all-for-benchmark"
}

run() {  # run NAME BATCH STEPS FLAGS...: one generate; sets TPOT (ms) and ACCEPT
  local name=$1 batch=$2 steps=$3
  shift 3
  # shellcheck disable=SC2046
  timeout 150 "$BIN/fission" generate --model-path $MODEL --load-format dummy --json-model-override-args "$OVERRIDE" \
    --device cuda --dtype bfloat16 --max-total-tokens 32768 --cuda-graph-bs 1 16 \
    --input "$OUT/spec_prompts_$batch.jsonl" $(spec_flags "$steps") "$@" \
    > "$OUT/spec_$name.out" 2> "$OUT/spec_$name.err"
  local rc=$?
  # decode:  N tokens in X s: TPOT = X * batch / N (every sequence decodes in every decode step).
  TPOT=$(awk -v b="$batch" '/^decode:/ { if ($2 > 0) printf "%.3f", $5 * 1000 * b / $2 }' "$OUT/spec_$name.err")
  ACCEPT=$(grep -o 'accept length [0-9.]*' "$OUT/spec_$name.err" | awk '{print $3}')
  [[ $rc == 0 && -n $TPOT ]] || { note "  $name: rc $rc (FAIL)"; tail -5 "$OUT/spec_$name.err" >> "$SUMMARY"; STATUS=1; }
  grep -E "CUDA graphs|are off" "$OUT/spec_$name.err" | head -3 | sed "s/^/  $name: /" >> "$SUMMARY"
}

printf "%-6s %-8s %12s %12s %8s %10s %14s\n" batch mode "graphs TPOT" "eager TPOT" accept "ids" "roofline/token" \
  | tee -a "$SUMMARY"
for batch in 1 16; do
  prompts "$batch" > "$OUT/spec_prompts_$batch.jsonl"
  for steps in 0 1 3; do
    mode=$([[ $steps == 0 ]] && echo none || echo "nextn$steps")
    run "${mode}_b${batch}_graphs" "$batch" "$steps"
    graphs=$TPOT accept=$ACCEPT
    run "${mode}_b${batch}_eager" "$batch" "$steps" --disable-cuda-graph
    eager=$TPOT
    if cmp -s "$OUT/spec_${mode}_b${batch}_graphs.out" "$OUT/spec_${mode}_b${batch}_eager.out" &&
       [[ -s $OUT/spec_${mode}_b${batch}_graphs.out ]]; then ids=identical; else ids=DIFFERENT; STATUS=1; fi
    roof=$(python3 tools/gpu/roofline.py $MODEL --override "$OVERRIDE" --context $(( INPUT + OUTPUT / 2 )) \
             --batch "$batch" --verify-tokens $(( steps + 1 )) --draft-steps "$steps" \
           | python3 -c 'import json, sys; print("%.3f" % json.load(sys.stdin)["token_ms"])')
    printf "%-6s %-8s %12s %12s %8s %10s %14s\n" "$batch" "$mode" "${graphs:-?} ms" "${eager:-?} ms" \
      "${accept:--}" "$ids" "$roof ms" | tee -a "$SUMMARY"
  done
done
note "TPOT: decode seconds x batch / decode tokens (draft steps included); accept: tokens per verify run"
note "spec_bench: $([[ $STATUS == 0 ]] && echo passed || echo FAILED)"
exit $STATUS
