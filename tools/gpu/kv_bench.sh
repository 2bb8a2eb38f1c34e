#!/usr/bin/env bash
# The FP8 KV cache on one GPU (a measurement, not a test): `fission generate` on DeepSeek-V3's
# dimensions with LAYERS layers (dummy FP8 weights drawn on the device), --kv-cache-dtype auto
# (bf16 rows) against fp8_e4m3 in the same invocation, batch 1 and 64, INPUT prompt tokens and
# OUTPUT greedy tokens (EOS ignored). Per point: decode tok/s, TPOT, the byte roofline of a step
# at the decode's mean context (tools/gpu/roofline.py) and the KV capacity in tokens the start-up
# log reports at the default --mem-fraction-static. Table in $OUT/kv_bench.txt.
#
#   usage: bash tools/gpu/kv_bench.sh BINDIR     Environment: OUT, LAYERS (4), INPUT (1024), OUTPUT (128)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
LAYERS=${LAYERS:-4}
INPUT=${INPUT:-1024}
OUTPUT=${OUTPUT:-128}
MODEL=bench/configs/deepseek-v3
OVERRIDE="{\"num_hidden_layers\": $LAYERS, \"first_k_dense_replace\": 1}"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SUMMARY=$OUT/kv_bench.txt
echo "DeepSeek-V3 dims, $LAYERS layers, dummy FP8 weights, input $INPUT, output $OUTPUT, $(date -u +%F)," \
  "commit $(head -1 "$BIN/COMMIT" 2>/dev/null)" | tee "$SUMMARY"
printf '%-9s %5s %10s %9s %10s %9s %14s\n' kv batch "tok/s" "TPOT ms" "roof ms" fraction "KV tokens" | tee -a "$SUMMARY"
for batch in 1 64; do
  python3 - "$batch" "$INPUT" "$OUTPUT" > "$OUT/kv_prompts.jsonl" <<'PY'
import json, random, sys
batch, n, out = map(int, sys.argv[1:])
r = random.Random(13)
for _ in range(batch):
    print(json.dumps({"input_ids": [r.randrange(3, 129000) for _ in range(n)],
                      "sampling_params": {"max_new_tokens": out, "ignore_eos": True}}))
PY
  for kv in auto fp8_e4m3; do
    log=$OUT/kv_${kv}_b$batch.log
    timeout 240 "$BIN/fission" generate --model-path $MODEL --load-format dummy --json-model-override-args "$OVERRIDE" \
      --device cuda --dtype bfloat16 --kv-cache-dtype "$kv" --max-running-requests 64 --input "$OUT/kv_prompts.jsonl" > /dev/null 2> "$log"
    rate=$(awk '/^decode:/ {for (i = 1; i < NF; ++i) if ($(i + 1) == "tokens/s") print $i}' "$log")
    tpot=$(awk -v b="$batch" '/^decode:/ { if ($2 > 0) printf "%.3f", $5 * 1000 * b / $2 }' "$log")
    tokens=$(grep -o 'model memory: [0-9]* pages of [0-9]* tokens ([0-9]* tokens' "$log" | grep -o '([0-9]*' | tr -d '(')
    roof=$(python3 tools/gpu/roofline.py $MODEL --override "$OVERRIDE" --context $(( INPUT + OUTPUT / 2 )) \
             --batch "$batch" --kv-cache-dtype "$kv" | python3 -c 'import json, sys; print("%.3f" % json.load(sys.stdin)["step_ms"])')
    frac=$(python3 -c "print('%.2f' % ($roof / $tpot))" 2>/dev/null || echo "?")
    printf '%-9s %5s %10s %9s %10s %9s %14s\n' "$kv" "$batch" "${rate:-failed}" "${tpot:-?}" "$roof" "$frac" \
      "${tokens:-?}" | tee -a "$SUMMARY"
    grep -E "model memory|CUDA graphs|are off" "$log" | head -3 | sed "s/^/  /" >> "$SUMMARY"
  done
done
