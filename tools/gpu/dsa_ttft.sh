#!/usr/bin/env bash
# DSA prefill benchmark (a measurement, not a test): the time to the first token of one prompt of
# 32K and 60K tokens on DeepSeek-V3.2's and GLM-5's real dimensions (bench/configs) with LAYERS
# layers (1 dense + MoE), dummy FP8 weights drawn on the device, one GPU, chunked prefill of
# CHUNK tokens; next to each the FLOP model's time (tools/gpu/dsa_flops.py at the FP8 and bf16
# tensor-core ceilings) and the ratio. Each line also runs the dense-attention reference in the
# same invocation at 60K: DeepSeek-V3 (bench/configs/deepseek-v3), the same dimensions with dense
# MLA and no indexer. Log: $OUT/dsa_ttft.log.
#
#   usage: bash tools/gpu/dsa_ttft.sh [BINDIR] [LAYERS] [CHUNK]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=${1:-build-gpu}
LAYERS=${2:-4}
CHUNK=${3:-16384}
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
LOG=$OUT/dsa_ttft.log
echo "DSA TTFT, $LAYERS layers, dummy FP8 weights, chunked prefill $CHUNK, one GPU" | tee "$LOG"
for cfg in deepseek-v3.2 glm-5; do
  for n in 32768 61440; do
    python3 -c "import json, random; r = random.Random($n); print(json.dumps({'input_ids': [r.randrange(3, 129000) for _ in range($n)], 'sampling_params': {'max_new_tokens': 1, 'ignore_eos': True}}))" > /tmp/dsa_prompt.jsonl
    base="\"num_hidden_layers\": $LAYERS, \"first_k_dense_replace\": 1"
    model=$(python3 tools/gpu/dsa_flops.py bench/configs/$cfg --tokens $n --layers $LAYERS --override "{$base}")
    predicted=$(python3 -c "import json,sys; print(f\"{json.loads(sys.argv[1])['ms']['total']:.0f}\")" "$model")
    for variant in sparse dense; do
      # The dense reference, DeepSeek-V3, beside DeepSeek-V3.2 at the longest prompt.
      [[ $variant == dense && ( $n != 61440 || $cfg != deepseek-v3.2 ) ]] && continue
      dir=bench/configs/$cfg
      [[ $variant == dense ]] && dir=bench/configs/deepseek-v3
      timeout "${BENCH_TIMEOUT:-300}" "$BIN/fission" generate --model-path $dir --load-format dummy \
        --json-model-override-args "{$base}" --device cuda --dtype bfloat16 --max-total-tokens 65536 \
        --chunked-prefill-size $CHUNK --max-prefill-tokens $CHUNK --disable-cuda-graph \
        --input /tmp/dsa_prompt.jsonl > /tmp/dsa.out 2> /tmp/dsa.err
      rc=$?
      line=$(grep '^prefill:' /tmp/dsa.err)
      ms=$(echo "$line" | python3 -c "import re,sys; m = re.search(r'in ([0-9.]+) s', sys.stdin.read()); print(f'{float(m.group(1))*1e3:.0f}' if m else 'nan')")
      ratio=$(python3 -c "print(f'{$ms / $predicted:.2f}' if '$ms' != 'nan' else 'nan')")
      echo "$cfg | tokens $n | $variant | rc $rc | $line | measured ${ms} ms | FLOP model ${predicted} ms (DSA) | ratio $ratio" | tee -a "$LOG"
      [[ $rc -ne 0 ]] && tail -5 /tmp/dsa.err >> "$LOG"
    done
    echo "  model: $model" >> "$LOG"
  done
done
