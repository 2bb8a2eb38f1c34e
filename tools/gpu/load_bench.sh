#!/usr/bin/env bash
# Weight loading from a warm page cache on one GPU (a measurement, not a test): writes checkpoints
# of Moonlight-16B-A3B's dimensions (bench/configs/moonlight-16b-a3b, 12 layers, arbitrary weights:
# tools/gpu/write_random_checkpoint.py), bf16 (about 14 GB) and FP8 in DeepSeek-V3's block format
# (about 8 GB), unless DIR and DIR-fp8 hold them; for each, reads its shards once with cat (the page
# cache's own rate: the reference), then loads it twice with `fission generate --dtype bfloat16`
# (one 8-token prompt, 2 new tokens) and reports the "loaded X GB in Y s" line; then
# --load-format dummy (weights drawn on the device) in the same invocation.
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
cat_rate() {  # dir: the page cache's rate for its shards
  local bytes start seconds
  bytes=$(cat "$1"/*.safetensors | wc -c)
  start=$(date +%s.%N)
  cat "$1"/*.safetensors > /dev/null
  seconds=$(python3 -c "import time; print('%.2f' % ($(date +%s.%N) - $start))")
  python3 -c "print('%.2f GB in %s s, %.2f GB/s' % ($bytes / 1e9, $seconds, $bytes / 1e9 / $seconds))"
}
run() {  # tag, --model-path and extra flags
  local tag=$1
  shift
  timeout 300 "$BIN/fission" generate --model-path "$@" --device cuda --dtype bfloat16 --prompt-ids 1,2,3,4,5,6,7,8 \
    --max-new-tokens 2 > /dev/null 2> "$OUT/load_$tag.log"
  echo "$tag: $(grep -hE 'loaded|drew' "$OUT/load_$tag.log" | sed 's/^\[[^]]*\] //' | head -1)" | tee -a "$LOG"
}
: > "$LOG"
for weights in bf16 fp8; do
  dir=$DIR
  flags=()
  [[ $weights == fp8 ]] && dir=$DIR-fp8 && flags=(--fp8)
  [[ -f $dir/model.safetensors.index.json ]] || python3 tools/gpu/write_random_checkpoint.py $MODEL "$dir" "${flags[@]}" | tee -a "$LOG"
  echo "$weights page cache (cat): $(cat_rate "$dir")" | tee -a "$LOG"
  run "${weights}_first" "$dir"
  run "${weights}_second" "$dir"
done
run dummy $MODEL --load-format dummy
