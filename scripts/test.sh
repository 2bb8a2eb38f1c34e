#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up, build, run every test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" --timeout 600
# The parsers' libFuzzer targets, a bounded run each (clang + AddressSanitizer).
scripts/fuzz.sh
