#!/usr/bin/env bash
# End-to-end serving benchmark (a measurement, not a test): `fission serve` on one GPU with
# DeepSeek-V3's real dimensions and few layers (dummy weights drawn on the device), driven by
# `fission bench` (sglang.bench_serving's client) at concurrency 1 and 64 on random 1024-token
# prompts with 256 output tokens. Prints TPOT next to its byte roofline (tools/gpu/roofline.py:
# weight bytes + KV bytes of a step / 4.2 TB/s). Logs in $OUT: serve_bench.log, server_*.log,
# bench_c*.jsonl.
#
#   usage: bash tools/gpu/serve_bench.sh BINDIR TOKENIZER_DIR [LAYERS] [WEIGHTS]
#   WEIGHTS: fp8 (the config's quantization_config, kept FP8 on the device) or bf16.
#   SERVER_FLAGS (environment): more `fission serve` flags (e.g. --disable-cuda-graph); TAG names
#   the run in the log file names (default: WEIGHTS); MODEL another config folder (default
#   bench/configs/deepseek-v3); FP8_CONFIG a quantization_config for a config that has none.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
TOK=$2
LAYERS=${3:-4}
WEIGHTS=${4:-fp8}
TAG=${TAG:-$WEIGHTS}
SERVER_FLAGS=${SERVER_FLAGS:-}
export NCCL_NVLS_ENABLE=0
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${NCCL_DIR:-}:${LD_LIBRARY_PATH:-}
MODEL=${MODEL:-bench/configs/deepseek-v3}
FP8_CONFIG=${FP8_CONFIG:-}
if [[ $WEIGHTS == fp8 ]]; then
  OVERRIDE="{\"num_hidden_layers\": $LAYERS, \"first_k_dense_replace\": 1${FP8_CONFIG:+, \"quantization_config\": $FP8_CONFIG}}"
else  # drop the quantization config: every matrix bf16
  OVERRIDE="{\"num_hidden_layers\": $LAYERS, \"first_k_dense_replace\": 1, \"quantization_config\": null}"
fi
INPUT=1024
OUTPUT=256
LOG=$OUT/serve_bench_$TAG.log
echo "$MODEL, $LAYERS layers, $WEIGHTS weights, input $INPUT, output $OUTPUT, flags: ${SERVER_FLAGS:-none}" | tee "$LOG"

"$BIN/fission" serve --model-path $MODEL --tokenizer-path "$TOK" --load-format dummy \
  --json-model-override-args "$OVERRIDE" --device cuda --dtype bfloat16 --port 0 \
  --max-running-requests 64 --context-length 4096 --served-model-name dsv3 $SERVER_FLAGS > "$OUT/server_$TAG.log" 2>&1 &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
PORT=""
for _ in $(seq 1 1200); do
  PORT=$(grep -o 'on http://127.0.0.1:[0-9]*' "$OUT/server_$TAG.log" | grep -o '[0-9]*$' || true)
  [[ -n $PORT ]] && break
  kill -0 $SERVER 2>/dev/null || break
  sleep 0.25
done
if [[ -z $PORT ]]; then echo "server did not start" | tee -a "$LOG"; tail -20 "$OUT/server_$TAG.log" | tee -a "$LOG"; exit 1; fi
grep -E "KV cache|loaded|device" "$OUT/server_$TAG.log" | head -5 | tee -a "$LOG"

for point in "1 8" "64 128"; do
  set -- $point
  conc=$1 prompts=$2
  timeout 300 "$BIN/fission" bench --backend sglang --base-url "http://127.0.0.1:$PORT" --tokenizer "$TOK" \
    --dataset-name random --random-input-len $INPUT --random-output-len $OUTPUT --random-range-ratio 1 \
    --num-prompts "$prompts" --max-concurrency "$conc" --seed 1 \
    --output-file "$OUT/bench_${TAG}_c$conc.jsonl" > "$OUT/bench_${TAG}_c$conc.txt" 2>&1
  echo "concurrency $conc: rc $?" | tee -a "$LOG"
  grep -E "Mean TTFT|Median TPOT|Mean TPOT|Output token throughput|Successful" "$OUT/bench_${TAG}_c$conc.txt" | tee -a "$LOG"
  context=$(( INPUT + OUTPUT / 2 ))
  python3 tools/gpu/roofline.py $MODEL --override "$OVERRIDE" --weights "$WEIGHTS" --context $context --batch "$conc" \
    | tee -a "$LOG"
done
grep -E "prefill|decode" "$OUT/server_$TAG.log" | tail -3 >> "$LOG" || true
