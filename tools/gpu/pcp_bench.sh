#!/usr/bin/env bash
# Prefill benchmark (a measurement, not a test): TTFT and prefill throughput of one prompt of 8K,
# 16K, 32K and 60K tokens for --tp-size 2 against --tp-size 2 --attn-cp-size 2, on DeepSeek-V3's
# real dimensions (bench/configs/deepseek-v3) with few layers, dummy bf16 weights drawn on the
# devices (WEIGHTS=fp8: the config's FP8 quantization kept, e4m3 codes and scales drawn on the
# devices; by default the override drops quantization_config so results compare with earlier runs). One `fission generate` per point, max_new_tokens 1, so "prefill: N tokens in T s" is
# the time to the first token (cold: the first step of the process). Log: $OUT/pcp_bench.log.
#
#   usage: bash tools/gpu/pcp_bench.sh [BINDIR] [LAYERS]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=${1:-build-gpu}
LAYERS=${2:-4}
export NCCL_NVLS_ENABLE=0
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${NCCL_DIR:-}:${LD_LIBRARY_PATH:-}
LOG=$OUT/pcp_bench.log
MODEL=bench/configs/deepseek-v3
WEIGHTS=${WEIGHTS:-bf16}
QUANT=', "quantization_config": null'
[[ $WEIGHTS == fp8 ]] && QUANT=''
OVERRIDE="{\"num_hidden_layers\": $LAYERS, \"first_k_dense_replace\": 1$QUANT}"
echo "DeepSeek-V3 dims, $LAYERS layers (1 dense + $((LAYERS - 1)) MoE), dummy $WEIGHTS weights" | tee "$LOG"
for n in 8192 16384 32768 61440; do
  python3 -c "import json, random; r = random.Random($n); print(json.dumps({'input_ids': [r.randrange(3, 129000) for _ in range($n)], 'sampling_params': {'max_new_tokens': 1, 'ignore_eos': True}}))" > /tmp/bench_prompt.jsonl
  for layout in "--tp-size 2" "--tp-size 2 --attn-cp-size 2"; do
    t0=$(date +%s.%N)
    timeout "${BENCH_TIMEOUT:-240}" "$BIN/fission" generate --model-path $MODEL --load-format dummy --json-model-override-args "$OVERRIDE" \
      --device cuda --dtype bfloat16 $layout --max-total-tokens 65536 --chunked-prefill-size 65536 \
      --max-prefill-tokens 65536 --input /tmp/bench_prompt.jsonl > /tmp/bench.out 2> /tmp/bench.err
    rc=$?
    t1=$(date +%s.%N)
    line=$(grep '^prefill:' /tmp/bench.err)
    echo "tokens $n | $layout | rc $rc | $line | process $(python3 -c "print(f'{$t1 - $t0:.1f}')") s" | tee -a "$LOG"
    if [[ $rc -ne 0 ]]; then tail -5 /tmp/bench.err >> "$LOG"; fi
  done
done
