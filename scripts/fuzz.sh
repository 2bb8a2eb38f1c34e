#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + AddressSanitizer in build-fuzz/ and runs each for a
# bounded time (default 20 s; FUZZ_SECONDS overrides), starting from the seeds in fuzz/corpus/.
# A crash, leak or sanitizer report fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-20}
BUILD=build-fuzz
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFISSION_BUILD_TESTS=OFF -DFISSION_BUILD_FUZZERS=ON -DFISSION_ENABLE_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" >/dev/null
fi
targets=$(cd fuzz && ls *_fuzz.cc | sed 's/\.cc$//')
# shellcheck disable=SC2086
cmake --build "$BUILD" -j "$(nproc)" --target $targets
for t in $targets; do
  name=${t%_fuzz}
  work=$(mktemp -d)
  [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$work/"
  echo "fuzz: $t for ${SECONDS_EACH}s"
  # Crash inputs are written next to the build, never into the source tree.
  mkdir -p "$BUILD/artifacts"
  "$BUILD/fuzz/$t" -max_total_time="$SECONDS_EACH" -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$BUILD/artifacts/$t-" "$work" 2>&1 | tail -3
  rm -rf "$work"
done
echo "fuzz: all targets ran without a crash"
