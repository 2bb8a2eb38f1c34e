#!/usr/bin/env bash
# DeepSeek-V4 on one GPU (a measurement, not a test): `fission generate` at DeepSeek-V4-Flash's
# dimensions with LAYERS layers (dummy bf16 weights drawn on the device; the layer kinds follow the
# config: sliding, sliding, CSA, HCA, ...) and EXPERTS routed experts, against transformers'
# DeepseekV4ForCausalLM (torch eager, bf16, random weights, tools/gpu/v4_torch_ref.py) at the same
# dimensions in the same invocation. Points: the prefill of one PREFILL-token prompt, and decode at
# each of BATCHES after CONTEXT-token prompts (OUTPUT greedy tokens, EOS ignored), each with the
# byte roofline of a decode step (tools/gpu/v4_roofline.py) and, with EAGER=1, the same run with
# --disable-cuda-graph as the reference (graphs against eager steps); the prefill next to its FLOP
# model (v4_roofline.py --prefill). Table in $OUT/v4_bench.txt.
#
#   usage: bash tools/gpu/v4_bench.sh BINDIR
#   Environment: OUT, LAYERS (4), EXPERTS (256), PREFILL (4096), CONTEXT (1024), OUTPUT (64), BATCHES ("1 16 64";
#   set and empty: the prefill only),
#   EAGER (1: also decode with --disable-cuda-graph), TORCH (1: run the transformers reference),
#   EXPERT_FORMAT (bf16, or fp4: the routed experts drawn and kept as FP4 with "expert_dtype": "fp4",
#   as V4-Flash's checkpoint stores them; the roofline counts 4.25 bits a routed weight),
#   KV ("auto fp8_e4m3": the cache dtypes to run), PROFILE (1: also FISSION_CUDA_OP_TIMING=1 tables, after the rates),
#   MODEL (bench/configs/deepseek-v4-flash; bench/configs/deepseek-v4-pro for V4-Pro's dimensions, TORCH=0)
# Every Fission run passes --warmup (its first prompt once, untimed), as the reference warms up.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
LAYERS=${LAYERS:-4}
EXPERTS=${EXPERTS:-256}
PREFILL=${PREFILL:-4096}
CONTEXT=${CONTEXT:-1024}
OUTPUT=${OUTPUT:-64}
MODEL=${MODEL:-bench/configs/deepseek-v4-flash}
EXPERT_FORMAT=${EXPERT_FORMAT:-bf16}
FP4_FIELD=$([[ $EXPERT_FORMAT == fp4 ]] && echo ', "expert_dtype": "fp4"')
OVERRIDE="{\"num_hidden_layers\": $LAYERS, \"n_routed_experts\": $EXPERTS$FP4_FIELD}"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SUMMARY=$OUT/v4_bench.txt
echo "DeepSeek-V4-Flash dims, $LAYERS layers, $EXPERTS experts ($EXPERT_FORMAT), dummy bf16 weights, $(date -u +%F)," \
  "commit $(head -1 "$BIN/COMMIT" 2>/dev/null)" | tee "$SUMMARY"

prompts() {  # prompts BATCH TOKENS OUTPUT > file
  python3 - "$@" <<'PY'
import json, random, sys
batch, n, out = map(int, sys.argv[1:])
r = random.Random(13)
for _ in range(batch):
    print(json.dumps({"input_ids": [r.randrange(3, 129000) for _ in range(n)],
                      "sampling_params": {"max_new_tokens": out, "ignore_eos": True}}))
PY
}
BATCHES=${BATCHES-1 16 64}
generate() {  # generate LOG PROMPTS KV [ARGS...]
  local log=$1 input=$2 kv=$3
  shift 3
  timeout 300 "$BIN/fission" generate --model-path $MODEL --load-format dummy --json-model-override-args "$OVERRIDE" \
    --device cuda --dtype bfloat16 --kv-cache-dtype "$kv" --max-running-requests 64 --chunked-prefill-size 16384 \
    --warmup --input "$input" "$@" > /dev/null 2> "$log"
}
tpot_of() {  # tpot_of LOG BATCH: ms a decode step
  awk -v b="$2" '/^decode:/ { if ($2 > 0) printf "%.3f", $5 * 1000 * b / $2 }' "$1"
}

prompts 1 "$PREFILL" 1 > "$OUT/v4_prefill.jsonl"
for batch in $BATCHES; do prompts "$batch" "$CONTEXT" "$OUTPUT" > "$OUT/v4_b$batch.jsonl"; done
for kv in ${KV:-auto fp8_e4m3}; do
  log=$OUT/v4_prefill_$kv.log
  generate "$log" "$OUT/v4_prefill.jsonl" "$kv"
  seconds=$(awk '/^prefill:/ {print $5}' "$log")
  flop_ms=$(python3 tools/gpu/v4_roofline.py $MODEL --override "$OVERRIDE" --prefill "$PREFILL" |
            python3 -c 'import json, sys; print("%.1f" % json.load(sys.stdin)["prefill_ms"])')
  ratio=$(python3 -c "print('%.1f' % ($seconds * 1000 / $flop_ms))" 2>/dev/null || echo "?")
  echo "fission prefill of $PREFILL tokens, kv $kv: $seconds s ($(awk '/^prefill:/ {print $7}' "$log") tok/s)," \
    "FLOP model $flop_ms ms: ${ratio}x" | tee -a "$SUMMARY"
  grep -E "error|CUDA graphs|model memory" "$log" | head -3 | sed "s/^/  /" >> "$SUMMARY"
  printf '%9s %5s %10s %9s %10s %9s %10s %7s\n' kv batch "tok/s" "TPOT ms" "roof ms" fraction "eager ms" ratio |
    tee -a "$SUMMARY"
  for batch in $BATCHES; do
    log=$OUT/v4_${kv}_b$batch.log
    generate "$log" "$OUT/v4_b$batch.jsonl" "$kv"
    grep -E "error|CUDA graphs" "$log" | head -2 | sed "s/^/  /" >> "$SUMMARY"
    rate=$(awk '/^decode:/ {print $7}' "$log")
    tpot=$(tpot_of "$log" "$batch")
    eager="-"
    if [[ ${EAGER:-1} == 1 ]]; then
      generate "$OUT/v4_${kv}_b${batch}_eager.log" "$OUT/v4_b$batch.jsonl" "$kv" --disable-cuda-graph
      eager=$(tpot_of "$OUT/v4_${kv}_b${batch}_eager.log" "$batch")
    fi
    roof=$(python3 tools/gpu/v4_roofline.py $MODEL --override "$OVERRIDE" --context $(( CONTEXT + OUTPUT / 2 )) \
             --batch "$batch" --kv-cache-dtype $([[ $kv == auto ]] && echo bf16 || echo "$kv") \
             --experts $([[ $EXPERT_FORMAT == fp4 ]] && echo fp4 || echo same) |
           python3 -c 'import json, sys; print("%.3f" % json.load(sys.stdin)["step_ms"])')
    frac=$(python3 -c "print('%.2f' % ($roof / $tpot))" 2>/dev/null || echo "?")
    ratio=$(python3 -c "print('%.2f' % ($eager / $tpot))" 2>/dev/null || echo "-")
    printf '%9s %5s %10s %9s %10s %9s %10s %7s\n' "$kv" "$batch" "${rate:-failed}" "${tpot:-?}" "$roof" "$frac" \
      "${eager:-?}" "$ratio" | tee -a "$SUMMARY"
  done
done
if [[ ${TORCH:-1} == 1 ]]; then
  for batch in 1 16; do  # the reference's decode is slow: two points
    timeout 300 python3 tools/gpu/v4_torch_ref.py "$LAYERS" "$EXPERTS" "$PREFILL" "$batch" "$CONTEXT" \
      > "$OUT/v4_torch_b$batch.log" 2>&1
    grep RESULT "$OUT/v4_torch_b$batch.log" | tee -a "$SUMMARY" || tail -3 "$OUT/v4_torch_b$batch.log" | tee -a "$SUMMARY"
  done
fi
if [[ ${PROFILE:-0} == 1 ]]; then  # where the time goes (timing serializes the device: shares, not rates)
  for p in prefill $([[ " $BATCHES " == *" 16 "* ]] && echo b16); do
    log=$OUT/v4_profile_$p.log
    FISSION_CUDA_OP_TIMING=1 generate "$log" "$OUT/v4_$p.jsonl" auto
    echo "== op timing, $p (bf16 KV):" >> "$SUMMARY"
    sed -n '/CUDA op timing/,$p' "$log" | head -24 >> "$SUMMARY"
  done
fi
