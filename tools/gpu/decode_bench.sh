#!/usr/bin/env bash
# Decode speed on one GPU (a measurement, not a test): the engine's decode rate through
# `fission generate` at batch 1 and 64 (1024 random prompt tokens, 256 greedy tokens each, EOS
# ignored) on Moonlight-16B-A3B's dimensions with DeepSeek-V3's vocabulary
# (bench/configs/moonlight-16b-a3b, 12 layers, dummy weights), bf16 and FP8 (the config plus a
# 128x128 block quantization_config), each next to its byte roofline (tools/gpu/roofline.py, at the
# mean context of the decode). REFBIN, when given, is a second build run the same way in the same
# invocation: the ratio new / reference is printed per point.
#
#   usage: bash tools/gpu/decode_bench.sh BINDIR [REFBIN]
#   Environment: OUT (logs; default ./gpu-out), LAYERS (default 12), OUTPUT (default 256),
#   BATCHES (default "1 64"), WEIGHTS (default "bf16 fp8"), MODEL (another config directory, e.g.
#   bench/configs/deepseek-v3 with LAYERS=4), EXTRA (more override fields, e.g.
#   '"first_k_dense_replace": 1').
# Log: $OUT/decode_bench.log (the table), $OUT/decode_<tag>.log (each run's stderr).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
REF=${2:-}
LAYERS=${LAYERS:-12}
INPUT=1024
OUTPUT=${OUTPUT:-256}
BATCHES=${BATCHES:-1 64}
WEIGHTS=${WEIGHTS:-bf16 fp8}
MODEL=${MODEL:-bench/configs/moonlight-16b-a3b}
EXTRA=${EXTRA:+, $EXTRA}
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
LOG=$OUT/decode_bench.log
# The roofline's bandwidth: 0.875 of the card's HBM (4.2 of an H200's 4.8 TB/s, 2.93 of an H100's
# 3.35), so fractions compare across the two cards; BANDWIDTH (GB/s) overrides.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case $GPU in *H100*) CARD_GBPS=2930 ;; *) CARD_GBPS=4200 ;; esac
BANDWIDTH=${BANDWIDTH:-$CARD_GBPS}
FP8='"quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}'

override() {  # weights
  if [[ $1 == fp8 ]]; then echo "{\"num_hidden_layers\": $LAYERS$EXTRA, $FP8}"; else echo "{\"num_hidden_layers\": $LAYERS$EXTRA}"; fi
}

prompts() {  # batch file
  python3 - "$1" "$INPUT" "$OUTPUT" > "$2" <<'PY'
import json, random, sys
r = random.Random(11)
for _ in range(int(sys.argv[1])):
    print(json.dumps({"input_ids": [r.randrange(3, 129000) for _ in range(int(sys.argv[2]))],
                      "sampling_params": {"max_new_tokens": int(sys.argv[3]), "ignore_eos": True}}))
PY
}

# Decode tokens/s of one run (the "decode:" line of the throughput summary), or "failed".
run() {  # bindir weights batch tag
  local bin=$1 weights=$2 batch=$3 tag=$4
  prompts "$batch" /tmp/decode_prompts.jsonl
  timeout 300 "$bin/fission" generate --model-path $MODEL --load-format dummy --json-model-override-args \
    "$(override "$weights")" --device cuda --dtype bfloat16 --max-running-requests 64 --context-length 2048 \
    --input /tmp/decode_prompts.jsonl > /dev/null 2> "$OUT/decode_$tag.log"
  local rate
  rate=$(awk '/^decode:/ {for (i = 1; i < NF; ++i) if ($(i + 1) == "tokens/s") print $i}' "$OUT/decode_$tag.log")
  echo "${rate:-failed}"
}

echo "$GPU, roofline at $BANDWIDTH GB/s" | tee "$LOG"
echo "decode, $MODEL, $LAYERS layers, input $INPUT, output $OUTPUT, new: $(head -1 "$BIN/COMMIT" 2>/dev/null)" \
  "reference: ${REF:+$(head -1 "$REF/COMMIT" 2>/dev/null)}" | tee -a "$LOG"
printf '%-6s %6s %12s %12s %10s %12s %9s\n' weights batch "new tok/s" "ref tok/s" "new/ref" "roofline" "fraction" | tee -a "$LOG"
for weights in $WEIGHTS; do
  for batch in $BATCHES; do
    new=$(run "$BIN" "$weights" "$batch" "${weights}_b${batch}_new")
    ref=-
    [[ -n $REF ]] && ref=$(run "$REF" "$weights" "$batch" "${weights}_b${batch}_ref")
    context=$(( INPUT + OUTPUT / 2 ))
    roof=$(python3 tools/gpu/roofline.py $MODEL --override "$(override "$weights")" --weights "$weights" \
      --context $context --batch "$batch" --bandwidth "$BANDWIDTH" | python3 -c 'import json, sys; print("%.1f" % (1000.0 * '"$batch"' / json.load(sys.stdin)["step_ms"]))')
    ratio=$(python3 -c "
try: print('%.2f' % (float('$new') / float('$ref')))
except Exception: print('-')")
    fraction=$(python3 -c "
try: print('%.2f' % (float('$new') / float('$roof')))
except Exception: print('-')")
    printf '%-6s %6s %12s %12s %10s %12s %9s\n' "$weights" "$batch" "$new" "$ref" "$ratio" "$roof" "$fraction" | tee -a "$LOG"
    grep -hE "CUDA graphs|are off|loaded" "$OUT/decode_${weights}_b${batch}_new.log" | head -3 | sed 's/^/  new: /' | tee -a "$LOG"
  done
done
