#!/usr/bin/env bash
# Fission's main job on a fresh machine: set up, build, start `fission serve` on the bundled demo
# model (CPU), then run a short `fission bench`, `fission eval` on the demo's held-out problems,
# and finally ask the server a question through the OpenAI chat API. The server is stopped at the
# end; start it yourself with `build/fission serve` (it listens on 127.0.0.1:30000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh

PORT=${PORT:-30000}
BASE=http://127.0.0.1:$PORT
LOG=$(mktemp -t fission-serve.XXXXXX.log)
build/fission serve --port "$PORT" --served-model-name demo >"$LOG" 2>&1 &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  curl -sf "$BASE/health" >/dev/null 2>&1 && break
  kill -0 $SERVER 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.2
done
head -1 "$LOG"

echo; echo "== fission bench: 32 random prompts, 4 at a time"
build/fission bench --backend sglang-oai --base-url "$BASE" --model demo --tokenizer models/demo-deepseek-v3 \
  --dataset-name random --random-input-len 128 --random-output-len 32 --random-range-ratio 0.5 \
  --num-prompts 32 --max-concurrency 4 --disable-tqdm

echo; echo "== fission eval: gsm8k-style, 3-shot, 100 held-out problems"
build/fission eval --base-url "$BASE" --model demo --data-dir tests/fixtures/demo --num-fewshot 3 --limit 100 \
  --num-concurrent 8 --disable-tqdm

QUESTION="Lena has 14 stickers. She buys 3 packs with 5 stickers in each pack. How many stickers does she have now?"
echo; echo "== chat: $QUESTION"
curl -s "$BASE/v1/chat/completions" -H 'Content-Type: application/json' \
  -d "{\"model\": \"demo\", \"temperature\": 0, \"messages\": [{\"role\": \"user\", \"content\": \"$QUESTION\"}]}" |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const r=JSON.parse(s);console.log(r.choices[0].message.content)})'
