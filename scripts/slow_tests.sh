#!/usr/bin/env bash
# The slow tier, which scripts/test.sh does not run: against `fission serve` on the demo model,
# the loopback load (malformed requests of every class from several clients at once, a good
# request during and after), the soak (minutes of mixed traffic, then a check that no request,
# KV page, descriptor or memory leaked) and 200 structured-output requests on the tool-trained
# demo model, every answer parsed and validated, and the demo model's 500 held-out problems under tp 4,
# dp 2, ep 4 against one rank. FISSION_LOAD_REQUESTS (default 20000),
# FISSION_SOAK_SECONDS (default 120) and FISSION_STRUCTURED_REQUESTS (default 200) bound them;
# extra arguments go to the test binary (--gtest_filter=Soak.* runs the soak alone).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" -j "$(nproc)" --target fission fission_server_slow_tests
"$BUILD_DIR/tests/fission_server_slow_tests" "$@"
