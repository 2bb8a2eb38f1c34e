#!/usr/bin/env bash
# `fission serve` driven by curl, the way people try a server by hand: a completion, a chat, a
# streamed chat with usage, and an error. Checks content, not just status. Run by CTest with the
# fission binary as $1.
set -euo pipefail
FISSION=$1
LOG=$(mktemp)
"$FISSION" serve --port 0 --served-model-name demo >"$LOG" 2>&1 &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 1 300); do
  PORT=$(grep -o 'on http://127.0.0.1:[0-9]*' "$LOG" | grep -o '[0-9]*$' || true)
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || { echo "server did not start"; cat "$LOG"; exit 1; }
BASE=http://127.0.0.1:$PORT
fail() { echo "FAIL: $*"; exit 1; }

out=$(curl -sf "$BASE/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "demo", "prompt": "Question: Kim has 8 pens and buys 9 more. How many pens?\nAnswer:", "max_tokens": 48, "temperature": 0, "stop": ["Question:"]}')
echo "$out" | grep -q '#### 17' || fail "completion: $out"
echo "$out" | grep -q '"finish_reason":"stop"' || fail "completion finish: $out"

out=$(curl -sf "$BASE/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model": "demo", "temperature": 0, "messages": [{"role": "user", "content": "Kim has 8 pens and buys 9 more. How many pens does she have?"}]}')
echo "$out" | grep -q '#### 17' || fail "chat: $out"

out=$(curl -sfN "$BASE/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model": "demo", "temperature": 0, "max_tokens": 8, "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "Hi"}]}')
[ "$(echo "$out" | tail -n 1)" = "data: [DONE]" ] || fail "stream must end with [DONE]: $out"
echo "$out" | grep -q '"completion_tokens":8' || fail "stream usage: $out"

code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/v1/completions" -d '{"prompt": 3}')
[ "$code" = 400 ] || fail "bad prompt gave $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/health")
[ "$code" = 200 ] || fail "health gave $code"

kill -TERM $SERVER
wait $SERVER || fail "fission serve must exit 0 on SIGTERM"
trap 'rm -f "$LOG"' EXIT
echo "curl test: 1 passed, 0 failed"
