#!/usr/bin/env bash
# Multi-node runs on one host: `fission generate` as two (and four) processes on localhost must
# print exactly the ids of the one-process --tp-size 1 run, for tensor parallelism and for tensor ×
# context parallelism with prompts over the context-parallel threshold; a follower with other
# flags gets the handshake error (and so does the leader); a follower with no leader times out;
# `fission serve` followers exit 0 when the leader drains on SIGTERM and non-zero when it vanishes.
# Run by CTest with the fission binary as $1.
set -uo pipefail
FISSION=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=$ROOT/tests/fixtures/models/tiny-deepseek-v3
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A port nothing listens on now (the kernel picks it; the run retries if it is taken meanwhile).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Prompts of 3, 17, 90 and 150 tokens (the last two over --pcp-min-tokens 64), greedy, 20 tokens.
RANDOM=7
for n in 3 17 90 150; do
  ids=""
  for ((i = 0; i < n; ++i)); do ids+="${ids:+,}$((RANDOM % 500 + 3))"; done
  echo "{\"input_ids\": [$ids], \"sampling_params\": {\"max_new_tokens\": 20, \"ignore_eos\": true}}"
done > "$WORK/prompts.jsonl"
COMMON=(--model-path "$MODEL" --input "$WORK/prompts.jsonl" --pcp-min-tokens 64 --dist-timeout 30)

"$FISSION" generate "${COMMON[@]}" --tp-size 1 > "$WORK/reference.out" 2> "$WORK/reference.err" ||
  { cat "$WORK/reference.err"; fail "the one-process run failed"; }
[ "$(wc -l < "$WORK/reference.out")" = 4 ] || fail "reference: $(cat "$WORK/reference.out")"

# run_nodes NAME NNODES ARGS...: node 0 and the followers of one generate run; node 0's output goes
# to $WORK/NAME.out, every node's stderr to $WORK/NAME.<rank>.err; fails unless all exit 0.
run_nodes() {
  local name=$1 nnodes=$2
  shift 2
  for attempt in 1 2 3; do
    local port
    port=$(free_port)
    local followers=()
    for ((r = 1; r < nnodes; ++r)); do
      "$FISSION" generate "${COMMON[@]}" "$@" --nnodes "$nnodes" --node-rank "$r" \
        --dist-init-addr "127.0.0.1:$port" > /dev/null 2> "$WORK/$name.$r.err" &
      followers+=($!)
      PIDS+=($!)
    done
    "$FISSION" generate "${COMMON[@]}" "$@" --nnodes "$nnodes" --node-rank 0 --dist-init-addr "127.0.0.1:$port" \
      > "$WORK/$name.out" 2> "$WORK/$name.0.err"
    local rc=$?
    if [ $rc -ne 0 ] && grep -q "cannot listen" "$WORK/$name.0.err"; then
      for p in "${followers[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
      continue  # the port was taken between free_port and listen: try another
    fi
    [ $rc -eq 0 ] || { cat "$WORK/$name".*.err; fail "$name: node 0 exited $rc"; }
    for p in "${followers[@]}"; do
      wait "$p" || { cat "$WORK/$name".*.err; fail "$name: a follower exited $?"; }
    done
    return 0
  done
  fail "$name: no free port after 3 attempts"
}

check_same() {
  cmp -s "$WORK/reference.out" "$WORK/$1.out" ||
    fail "$1 differs from --tp-size 1:"$'\n'"$(diff "$WORK/reference.out" "$WORK/$1.out" | head -5)"
  echo "ok: $1 equals the one-process --tp-size 1 run"
}

run_nodes tp2_nodes2 2 --tp-size 2
check_same tp2_nodes2
run_nodes tp4_cp2_nodes2 2 --tp-size 4 --attn-cp-size 2
check_same tp4_cp2_nodes2
grep -q "the leader shut down" "$WORK/tp4_cp2_nodes2.1.err" || fail "the follower did not see the shutdown"
run_nodes tp4_cp2_nodes4 4 --tp-size 4 --attn-cp-size 2
check_same tp4_cp2_nodes4

# A follower with another layout: the same handshake error on both sides, exit 2 on both.
port=$(free_port)
"$FISSION" generate "${COMMON[@]}" --tp-size 2 --attn-cp-size 2 --nnodes 2 --node-rank 1 \
  --dist-init-addr "127.0.0.1:$port" > /dev/null 2> "$WORK/mismatch.1.err" &
follower=$!
PIDS+=($follower)
"$FISSION" generate "${COMMON[@]}" --tp-size 2 --nnodes 2 --dist-init-addr "127.0.0.1:$port" \
  > /dev/null 2> "$WORK/mismatch.0.err"
leader_rc=$?
wait $follower
follower_rc=$?
expected="--attn-cp-size is '2' on node 1 but '1' on node 0"
[ $leader_rc -eq 2 ] && [ $follower_rc -eq 2 ] || fail "mismatch: exit codes $leader_rc and $follower_rc"
grep -qF -- "$expected" "$WORK/mismatch.0.err" || fail "leader: $(cat "$WORK/mismatch.0.err")"
grep -qF -- "$expected" "$WORK/mismatch.1.err" || fail "follower: $(cat "$WORK/mismatch.1.err")"
echo "ok: a mismatching follower gets the handshake error on both nodes"

# Node 0 failing after start-up (a prompt id outside the vocabulary fails in the engine, after the
# model and the link exist): the follower must exit non-zero, not 0.
port=$(free_port)
"$FISSION" generate --model-path "$MODEL" --tp-size 2 --nnodes 2 --node-rank 1 --dist-init-addr "127.0.0.1:$port" \
  --dist-timeout 30 > /dev/null 2> "$WORK/failing.1.err" &
follower=$!
PIDS+=($follower)
"$FISSION" generate --model-path "$MODEL" --tp-size 2 --nnodes 2 --dist-init-addr "127.0.0.1:$port" \
  --dist-timeout 30 --prompt-ids 5,6,99999999 > /dev/null 2> "$WORK/failing.0.err" && fail "node 0 accepted a bad prompt"
wait $follower && fail "the follower exited 0 after node 0 failed"
grep -q "stopped because of an error" "$WORK/failing.1.err" || fail "failing leader: $(cat "$WORK/failing.1.err")"
echo "ok: a follower exits non-zero when node 0 fails"

# A follower with nobody to follow gives up after --dist-timeout.
port=$(free_port)
start=$(date +%s)
"$FISSION" generate --model-path "$MODEL" --tp-size 2 --nnodes 2 --node-rank 1 --dist-init-addr "127.0.0.1:$port" \
  --dist-timeout 1 > /dev/null 2> "$WORK/alone.err" && fail "a follower without a leader exited 0"
grep -q "could not connect within 1 s" "$WORK/alone.err" || fail "alone: $(cat "$WORK/alone.err")"
(( $(date +%s) - start < 10 )) || fail "the connection timeout took too long"
echo "ok: a follower without a leader times out"

# `fission serve`: the follower runs without HTTP; SIGTERM on node 0 ends both with exit 0, and a
# node 0 that vanishes makes the follower exit non-zero with a message.
serve_pair() {
  SERVE_PORT=$(free_port)
  "$FISSION" serve --model-path "$MODEL" --tokenizer-path "$ROOT/models/demo-deepseek-v3" --device cpu \
    --tp-size 2 --nnodes 2 --node-rank 1 --dist-init-addr "127.0.0.1:$SERVE_PORT" > "$WORK/serve.1.out" \
    2> "$WORK/serve.1.err" &
  SERVE_FOLLOWER=$!
  PIDS+=($SERVE_FOLLOWER)
  "$FISSION" serve --model-path "$MODEL" --tokenizer-path "$ROOT/models/demo-deepseek-v3" --device cpu --port 0 \
    --tp-size 2 --nnodes 2 --dist-init-addr "127.0.0.1:$SERVE_PORT" > "$WORK/serve.0.out" 2> "$WORK/serve.0.err" &
  SERVE_LEADER=$!
  PIDS+=($SERVE_LEADER)
  for _ in $(seq 1 300); do
    HTTP=$(grep -o 'on http://127.0.0.1:[0-9]*' "$WORK/serve.0.out" | grep -o '[0-9]*$' || true)
    [ -n "$HTTP" ] && return 0
    sleep 0.1
  done
  cat "$WORK"/serve.*; fail "the serve leader did not start"
}
serve_pair
grep -q "following" "$WORK/serve.1.out" || fail "serve follower: $(cat "$WORK/serve.1.out")"
if command -v curl > /dev/null; then
  out=$(curl -sf "http://127.0.0.1:$HTTP/generate" -H 'Content-Type: application/json' \
    -d '{"input_ids": [5, 6, 7, 8, 9, 10], "sampling_params": {"max_new_tokens": 16, "temperature": 0, "ignore_eos": true}}')
  solo=$("$FISSION" generate --model-path "$MODEL" --prompt-ids 5,6,7,8,9,10 --max-new-tokens 16 --ignore-eos 2>/dev/null)
  echo "$out" | tr -d ' ' | grep -q "\"output_ids\":\[$solo\]" || fail "serve over two nodes: $out (one process: $solo)"
  echo "ok: serve over two nodes answers with the one-process ids"
fi
kill -TERM $SERVE_LEADER
wait $SERVE_LEADER || fail "the serve leader must exit 0 on SIGTERM"
wait $SERVE_FOLLOWER || fail "the serve follower must exit 0 after the leader's shutdown: $(cat "$WORK/serve.1.err")"
echo "ok: SIGTERM on node 0 stops both serve nodes with exit 0"

serve_pair
kill -9 $SERVE_LEADER
wait $SERVE_LEADER 2>/dev/null
wait $SERVE_FOLLOWER && fail "the follower exited 0 after the leader vanished"
grep -q "closed the connection without a shutdown message" "$WORK/serve.1.err" ||
  fail "follower after a lost leader: $(cat "$WORK/serve.1.err")"
echo "ok: a follower whose leader vanishes exits non-zero with a message"
echo "multinode test: passed"
