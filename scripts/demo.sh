#!/usr/bin/env bash
# Fission's main job on a fresh machine: install what the build needs, build the `fission` binary
# (nothing else: no tests, no benchmarks), start `fission serve` on the bundled demo model (CPU),
# ask it a question through the OpenAI chat API, then run a short `fission bench` and a
# `fission eval` on the demo's held-out problems. The server is stopped at the end; start it
# yourself with `build/fission serve` (it listens on 127.0.0.1:30000).
#
# Arguments go to the build's first CMake configure (e.g. -DFISSION_ENABLE_CUDA=OFF). FISSION_BIN=PATH
# runs the same steps against an already built binary, without set-up or build (the CI test does
# that). PORT picks the server's port (default 30000; 0 takes any free one); EVAL_LIMIT the number
# of held-out problems the eval runs (default 100).
# Each step checks its result: a wrong answer, failed requests or a low score end the demo with
# an error.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${FISSION_BIN:-}" ]; then
  scripts/setup.sh --build-only
  BUILD_TARGETS=fission scripts/build.sh "$@"
  FISSION_BIN=${BUILD_DIR:-build}/fission
fi

LOG=$(mktemp -t fission-serve.XXXXXX.log)
"$FISSION_BIN" serve --port "${PORT:-30000}" --served-model-name demo >"$LOG" 2>&1 &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true; rm -f "$LOG" "$LOG.bench"' EXIT
BASE=
for _ in $(seq 1 300); do
  BASE=$(grep -o 'on http://[0-9.]*:[0-9]*' "$LOG" | head -1 | cut -c4- || true)
  [ -n "$BASE" ] && curl -sf "$BASE/health" >/dev/null 2>&1 && break
  kill -0 $SERVER 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.2
done
head -1 "$LOG"

# The demo model knows arithmetic word problems in the phrasings of its training data
# (docs/demo_model.md): this is one of them, never seen in training.
QUESTION="Lena buys 3 packs of stickers. Each pack has 5 stickers. She already had 14 stickers. How many stickers does she have now?"
EXPECTED=29
echo; echo "== chat: $QUESTION"
BODY=$(python3 -c 'import json, sys; print(json.dumps({"model": "demo", "temperature": 0,
    "messages": [{"role": "user", "content": sys.argv[1]}]}))' "$QUESTION")
ANSWER=$(curl -sf "$BASE/v1/chat/completions" -H 'Content-Type: application/json' -d "$BODY" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["message"]["content"])')
echo "$ANSWER"
echo "(answered ${SECONDS} s after the demo started)"
echo "$ANSWER" | grep -q "#### $EXPECTED\$" || { echo "demo: expected the answer $EXPECTED"; exit 1; }

echo; echo "== fission bench: 32 random prompts, 4 at a time"
"$FISSION_BIN" bench --backend sglang-oai --base-url "$BASE" --model demo --tokenizer models/demo-deepseek-v3 \
  --dataset-name random --random-input-len 128 --random-output-len 32 --random-range-ratio 0.5 \
  --num-prompts 32 --max-concurrency 4 --disable-tqdm | tee "$LOG.bench"
grep -q "^Successful requests: *32 " "$LOG.bench" || { echo "demo: the bench did not complete 32 requests"; exit 1; }


echo; echo "== fission eval: gsm8k-style, 3-shot, ${EVAL_LIMIT:=100} held-out problems"
"$FISSION_BIN" eval --base-url "$BASE" --model demo --data-dir tests/fixtures/demo --num-fewshot 3 \
  --limit "$EVAL_LIMIT" --num-concurrent 8 --disable-tqdm --threshold 0.9
echo; echo "demo: done in ${SECONDS} s"
