#!/usr/bin/env bash
# Weight loading from a warm page cache on one GPU (a measurement, not a test): writes a bf16
# checkpoint of Moonlight-16B-A3B's dimensions (bench/configs/moonlight-16b-a3b, 12 layers, about
# 15 GB, arbitrary weights: tools/gpu/write_random_checkpoint.py) unless DIR holds one, reads its
# shards once with cat (the page cache's own rate: the reference), then loads it twice with
# `fission generate` (one 8-token prompt, 2 new tokens) and reports the "loaded X GB in Y s" line,
# next to --load-format dummy (weights drawn on the device) in the same invocation.
#
#   usage: bash tools/gpu/load_bench.sh BINDIR [DIR]     Environment: OUT (default ./gpu-out)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
DIR=${2:-/tmp/fission-load-bench}
MODEL=bench/configs/moonlight-16b-a3b
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
LOG=$OUT/load_bench.txt
[[ -f $DIR/model.safetensors.index.json ]] || python3 tools/gpu/write_random_checkpoint.py $MODEL "$DIR" | tee "$LOG"
bytes=$(cat "$DIR"/*.safetensors | wc -c)
start=$(date +%s.%N)
cat "$DIR"/*.safetensors > /dev/null
cat_s=$(python3 -c "import time; print('%.2f' % ($(date +%s.%N) - $start))")
echo "page cache: $(python3 -c "print('%.2f GB in %s s, %.2f GB/s' % ($bytes / 1e9, $cat_s, $bytes / 1e9 / $cat_s))") (cat)" \
  | tee -a "$LOG"
run() {  # tag, extra flags
  local tag=$1
  shift
  timeout 300 "$BIN/fission" generate --model-path "$@" --device cuda --dtype bfloat16 --prompt-ids 1,2,3,4,5,6,7,8 \
    --max-new-tokens 2 > /dev/null 2> "$OUT/load_$tag.log"
  echo "$tag: $(grep -hE 'loaded|drew' "$OUT/load_$tag.log" | sed 's/^\[[^]]*\] //' | head -1)" | tee -a "$LOG"
}
run first "$DIR"
run second "$DIR"
run dummy $MODEL --load-format dummy
