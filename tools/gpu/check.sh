#!/usr/bin/env bash
# Builds the CUDA backend on the GPU host, runs every CUDA test and every benchmark in one
# invocation, and prints a short table. Logs go to $OUT (or ./gpu-out): build.log, tests.log,
# bench.log, torch.log, report.md, env.txt.
#   usage: bash tools/gpu/check.sh [--no-bench]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
BUILD=build-gpu
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  nvcc --version | tail -1; git rev-parse HEAD 2>/dev/null || true; cat COMMIT 2>/dev/null || true
} > "$OUT/env.txt" 2>&1

t0=$(date +%s)
if ! { cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
         -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) &&
       ninja -C $BUILD -j16 fission_kernels_cuda_tests fission_cuda_bench; } > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
fi
echo "build: $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
timeout 150 ./$BUILD/tests/fission_kernels_cuda_tests --gtest_color=no > "$OUT/tests.log" 2>&1
test_rc=$?
echo "tests: rc=$test_rc, $(( $(date +%s) - t0 )) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED) \]|Failure|Expected|Which is|rel|FP8 GEMM path" "$OUT/tests.log" | head -40

if [[ "${1:-}" != "--no-bench" ]]; then
  t0=$(date +%s)
  timeout 170 ./$BUILD/fission_cuda_bench > "$OUT/bench.log" 2>&1 || echo "bench rc=$?"
  echo "bench: $(( $(date +%s) - t0 )) s"
  t0=$(date +%s)
  timeout 120 python3 tools/gpu/torch_ref.py > "$OUT/torch.log" 2>&1 || echo "torch rc=$?"
  echo "torch: $(( $(date +%s) - t0 )) s"
  python3 tools/gpu/report.py "$OUT/bench.log" "$OUT/torch.log" | tee "$OUT/report.md"
fi
exit $test_rc
