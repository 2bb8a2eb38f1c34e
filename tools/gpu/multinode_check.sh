#!/usr/bin/env bash
# Multi-node bootstrap on one GPU host: every "node" is a `fission generate` process with its own
# GPUs (--device cuda:K is each node's base), meeting over NCCL with unique ids the leader sends
# over --dist-init-addr. Greedy ids over two processes must equal the one-process run of the same
# layout; the single-GPU run is reported alongside (TP changes bf16 product order, so it may
# differ). Logs and summary.txt go to $OUT (or ./gpu-out).
#
#   usage: bash tools/gpu/multinode_check.sh [BINDIR]     (BINDIR holds fission; default build-gpu)
#   needs 2 GPUs (4 for the TP4 x CP2 case). Exit status: 0 when every required comparison holds.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=${1:-build-gpu}
export NCCL_NVLS_ENABLE=0
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${NCCL_DIR:-}:${LD_LIBRARY_PATH:-}
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
SUMMARY=$OUT/multinode_summary.txt
LOG=$OUT/multinode.log
: > "$SUMMARY"
: > "$LOG"
note() { echo "$*" | tee -a "$SUMMARY"; }
(( GPUS >= 2 )) || { note "multinode: needs 2 GPUs, found $GPUS"; exit 1; }
STATUS=0

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
prompts() { python3 tools/gpu/prompts.py "$1" 150; }

# one NAME ARGS...: one process.
one() {
  local name=$1; shift
  echo "== $name: $*" >> "$LOG"
  timeout 300 "$BIN/fission" generate "${COMMON[@]}" "$@" > "$OUT/mn_$name.out" 2>> "$LOG"
}
# two NAME BASE0 BASE1 ARGS...: node 0 on cuda:BASE0.., node 1 on cuda:BASE1..
two() {
  local name=$1 base0=$2 base1=$3; shift 3
  local port; port=$(free_port)
  echo "== $name: node bases cuda:$base0 cuda:$base1: $*" >> "$LOG"
  timeout 300 "$BIN/fission" generate "${COMMON[@]}" "$@" --device "cuda:$base1" --nnodes 2 --node-rank 1 \
    --dist-init-addr "127.0.0.1:$port" > /dev/null 2> "$OUT/mn_$name.1.err" &
  local follower=$!
  timeout 300 "$BIN/fission" generate "${COMMON[@]}" "$@" --device "cuda:$base0" --nnodes 2 \
    --dist-init-addr "127.0.0.1:$port" > "$OUT/mn_$name.out" 2>> "$LOG"
  local rc=$?
  wait $follower
  local frc=$?
  cat "$OUT/mn_$name.1.err" >> "$LOG"
  return $(( rc != 0 || frc != 0 ))
}
compare() {  # compare NAME REF REQUIRED
  if cmp -s "$OUT/mn_$1.out" "$OUT/mn_$2.out" && [[ -s $OUT/mn_$1.out ]]; then
    note "  $1: identical ids to $2"
  else
    note "  $1: DIFFERENT from $2$([[ $3 == required ]] && echo ' (required: FAIL)')"
    [[ $3 == required ]] && STATUS=1
  fi
}

for model in tests/fixtures/models/tiny-deepseek-v3 models/demo-deepseek-v3; do
  prompts "$model" > "$OUT/mn_prompts.jsonl"
  for dtype in auto bfloat16; do
    COMMON=(--model-path "$model" --input "$OUT/mn_prompts.jsonl" --dtype "$dtype" --dist-timeout 120)
    note "$model --dtype $dtype"
    one gpu1 --device cuda:0; note "  one GPU: rc $?"
    one tp2 --device cuda:0 --tp-size 2; note "  one process, --tp-size 2: rc $?"
    two tp2_nodes2 0 1 --tp-size 2; note "  two processes, --tp-size 2 --nnodes 2: rc $?"
    compare tp2_nodes2 tp2 required
    compare tp2_nodes2 gpu1 reported
    if (( GPUS >= 4 )); then
      one tp4cp2 --device cuda:0 --tp-size 4 --attn-cp-size 2; note "  one process, tp4 cp2: rc $?"
      two tp4cp2_nodes2 0 2 --tp-size 4 --attn-cp-size 2; note "  two processes, tp4 cp2 --nnodes 2: rc $?"
      compare tp4cp2_nodes2 tp4cp2 reported  # four-rank NCCL sums may take another order across processes
      compare tp4cp2_nodes2 gpu1 reported
    fi
  done
done
grep -E "prefill|decode|error" "$LOG" | head -20 >> "$SUMMARY"
note "multinode_check: $([[ $STATUS == 0 ]] && echo passed || echo FAILED)"
exit $STATUS
