#!/usr/bin/env bash
# The server's integration tests with the model on the GPU: `fission serve` picks `--device auto`,
# which is cuda on this host, so the route, streaming, parser, load and client tests of
# fission_server_tests and tests/server/curl_test.sh (and the Node `openai` client test when node is
# installed) run against the demo model on CUDA. Checks the server log says cuda first.
# Logs in $OUT: serve_check.log, server_tests.log.
#
#   usage: bash tools/gpu/serve_check.sh BINDIR
#   BINDIR holds fission and tests/fission_server_tests built with FISSION_BINARY_DIR = BINDIR's
#   path as the test binary sees it (see tools/gpu/session.sh, which links the build path).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
LOG=$OUT/serve_check.log
: > "$LOG"
note() { echo "$*" | tee -a "$LOG"; }

# Which device does `fission serve` pick here?
"$BIN/fission" serve --port 0 > /tmp/serve_device.log 2>&1 &
pid=$!
for _ in $(seq 1 200); do grep -q 'on http://' /tmp/serve_device.log && break; sleep 0.1; done
kill -TERM $pid; wait $pid
note "serve picks: $(grep -o '"device"[^,]*' /tmp/serve_device.log | head -1) $(grep -iE 'cuda|device' /tmp/serve_device.log | head -2 | tr '\n' ' ')"

t=$(date +%s)
timeout 400 "$BIN/tests/fission_server_tests" --gtest_color=no > "$OUT/server_tests.log" 2>&1
note "fission_server_tests: rc $? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/server_tests.log" | tr '\n' ' ')) $(( $(date +%s) - t ))s"
grep -E '^\[  FAILED' "$OUT/server_tests.log" | head -20 | tee -a "$LOG"
timeout 120 bash tests/server/curl_test.sh "$BIN/fission" >> "$LOG" 2>&1
note "curl_test: rc $?"
if command -v node > /dev/null && [[ -d .cache/npm/node_modules/openai ]]; then
  FISSION_BIN="$PWD/$BIN/fission" FISSION_NPM_DIR=$PWD/.cache/npm timeout 180 node --test tests/server/openai_client.test.mjs >> "$LOG" 2>&1
  note "openai node client test: rc $?"
else
  note "openai node client test: skipped (no node or no .cache/npm/node_modules/openai on this host)"
fi
