#!/usr/bin/env bash
# Configures (once) and builds Fission and its tests into build/ with CMake and Ninja.
# BUILD_DIR picks another folder; BUILD_TARGETS="fission ..." builds only those targets (the demo
# builds the binary alone). Extra arguments go to the first configure.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
