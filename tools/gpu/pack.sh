#!/usr/bin/env bash
# Packs what a device session needs into an ignored folder to carry to the GPU host (which has
# CUDA and NCCL but not every library the build links): the fission binary, the CUDA benchmarks,
# the test binaries session.sh runs, libgomp and libpcre2, the commit, and the DeepSeek tokenizer.
#
#   usage: bash tools/gpu/pack.sh [DEST]     (default .carry/s; then run tools/gpu/session.sh DEST/bin DEST/tok ...)
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.carry/s}
BUILD=${BUILD:-build}
rm -rf "$DEST/bin" && mkdir -p "$DEST/bin/tests" "$DEST/bin/lib" "$DEST/tok"
cp "$BUILD/fission" "$BUILD/fission_cuda_bench" "$BUILD/fission_comm_bench" "$DEST/bin/"
for t in fission_kernels_cuda_tests fission_model_cuda_tests fission_server_tests fission_kernels_tests; do
  cp "$BUILD/tests/$t" "$DEST/bin/tests/"
done
for lib in libgomp.so.1 libpcre2-8.so.0; do
  cp "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" "$DEST/bin/lib/"
done
# The server tests start fission from the build folder they were compiled in: session.sh links it.
basename "$BUILD" > "$DEST/bin/BUILD_DIR"
git rev-parse HEAD > "$DEST/bin/COMMIT"
git status --short | head -5 >> "$DEST/bin/COMMIT"
TOK=$(find .cache -path '*tokenizer-deepseek_v3*' -name tokenizer.json 2>/dev/null | head -1)
[[ -n $TOK ]] && cp "$(dirname "$TOK")"/tokenizer*.json "$DEST/tok/"
du -sh "$DEST"
