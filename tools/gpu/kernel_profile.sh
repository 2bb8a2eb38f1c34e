#!/usr/bin/env bash
# Where a captured decode step's time goes, kernel by kernel (a measurement, not a test): Nsight
# Compute times every kernel node of the replayed decode graphs of `fission generate` on
# Moonlight-16B-A3B's dimensions (bench/configs/moonlight-16b-a3b, dummy weights, one GPU) and
# tools/gpu/kernel_table.py prints the last whole decode step: each kernel in launch order with its
# time and DRAM bytes, then the same grouped by kernel name. Kernels run one at a time under the
# profiler, so the sum is the step without launch overlap; the clocks and caches are left alone.
#
#   usage: bash tools/gpu/kernel_profile.sh BINDIR [TAG]
#   Environment: OUT (default ./gpu-out), WEIGHTS (bf16 or fp8, default bf16), BATCH (default 1),
#   LAYERS (default 12), INPUT (prompt tokens, default 200: a short prefill keeps the profiled
#   kernels few), LIMIT (seconds, default 300), REF_CSV (the same run's CSV from a reference build:
#   the grouped table then shows its time beside each kernel and the change).
# Log: $OUT/kernels_<TAG>.log (the tables), $OUT/kernels_<TAG>.csv (ncu's raw rows).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
TAG=${2:-new}
WEIGHTS=${WEIGHTS:-bf16}
BATCH=${BATCH:-1}
LAYERS=${LAYERS:-12}
INPUT=${INPUT:-200}
LIMIT=${LIMIT:-300}
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
FP8='"quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}'
override="{\"num_hidden_layers\": $LAYERS}"
[[ $WEIGHTS == fp8 ]] && override="{\"num_hidden_layers\": $LAYERS, $FP8}"
python3 - "$BATCH" "$INPUT" > /tmp/kernel_prompts.jsonl <<'PY'
import json, random, sys
r = random.Random(5)
for _ in range(int(sys.argv[1])):
    print(json.dumps({"input_ids": [r.randrange(3, 129000) for _ in range(int(sys.argv[2]))],
                      "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}))
PY
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[[ -z $NCU ]] && { echo "kernel_profile: no ncu on this host" | tee "$OUT/kernels_$TAG.log"; exit 1; }
timeout "$LIMIT" "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum \
  --csv --print-units base --log-file "$OUT/kernels_$TAG.ncu.log" \
  "$BIN/fission" generate --model-path bench/configs/moonlight-16b-a3b --load-format dummy \
  --json-model-override-args "$override" --device cuda --dtype bfloat16 --context-length 2048 \
  --cuda-graph-bs "$BATCH" --input /tmp/kernel_prompts.jsonl > /dev/null 2> "$OUT/kernels_$TAG.stderr"
# ncu writes its CSV rows into the log file, after its own "==PROF==" lines.
grep -v '^==' "$OUT/kernels_$TAG.ncu.log" > "$OUT/kernels_$TAG.csv"
python3 tools/gpu/kernel_table.py "$OUT/kernels_$TAG.csv" ${REF_CSV:+--ref "$REF_CSV"} \
  "$WEIGHTS weights, batch $BATCH, $INPUT prompt tokens, $LAYERS layers, $(head -1 "$BIN/COMMIT" 2>/dev/null)" | tee "$OUT/kernels_$TAG.log"
