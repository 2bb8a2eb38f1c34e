#!/usr/bin/env bash
# Builds the CUDA backend on the GPU host, runs every CUDA test and every benchmark in one
# invocation, and prints a short table. Logs go to $OUT (or ./gpu-out): env.txt, build.log,
# tests.log, sanitizer.log (only when a test suite crashed), bench.log, torch.log, report.md.
#
#   usage: bash tools/gpu/check.sh [--prebuilt DIR [--no-build]] [--no-bench]
#   --prebuilt DIR: run DIR/fission_kernels_cuda_tests and DIR/fission_cuda_bench (built elsewhere
#                   with the same CUDA) while the build here runs alongside; its result is
#                   checked at the end (saves device time); --no-build skips that build.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
BUILD=build-gpu
PREBUILT=""
BENCH=1
BUILD_HERE=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prebuilt) PREBUILT=$2; shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    --no-build) BUILD_HERE=0; shift ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
done
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  nvcc --version | tail -1; cat COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || true
} > "$OUT/env.txt" 2>&1
head -3 "$OUT/env.txt"

NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
# The whole project when its dependencies are here; otherwise the CUDA backend, its tests (when
# GoogleTest is here) and its benchmarks alone (tools/gpu/cuda_only). Leaves the binaries' paths in
# BUILT_TESTS and BUILT_BENCH.
build() {
  if cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
       -DCMAKE_CUDA_COMPILER="$NVCC"; then
    ninja -C $BUILD -j"${JOBS:-16}" fission_kernels_cuda_tests fission_cuda_bench || return 1
    echo "BUILT $BUILD/tests/fission_kernels_cuda_tests $BUILD/fission_cuda_bench"
  else
    echo "full configure failed: building tools/gpu/cuda_only"
    cmake -S tools/gpu/cuda_only -B $BUILD-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCMAKE_CUDA_COMPILER="$NVCC" && ninja -C $BUILD-cuda -j"${JOBS:-16}" || return 1
    echo "BUILT $BUILD-cuda/fission_kernels_cuda_tests $BUILD-cuda/fission_cuda_bench"
  fi
}
built() {  # field $1 of the BUILT line of the build log
  grep '^BUILT ' "$OUT/build.log" | tail -1 | cut -d' ' -f$(( $1 + 1 ))
}

t0=$(date +%s)
TESTS=$BUILD/tests/fission_kernels_cuda_tests
BENCHBIN=$BUILD/fission_cuda_bench
if [[ -n "$PREBUILT" ]] && "$PREBUILT/fission_kernels_cuda_tests" --gtest_list_tests > /dev/null 2>&1; then
  echo "using prebuilt binaries from $PREBUILT; building here alongside"
  TESTS=$PREBUILT/fission_kernels_cuda_tests
  BENCHBIN=$PREBUILT/fission_cuda_bench
  BUILD_PID=""
  if [[ $BUILD_HERE -eq 1 ]]; then
    JOBS=8 build > "$OUT/build.log" 2>&1 &
    BUILD_PID=$!
  fi
else
  if ! build > "$OUT/build.log" 2>&1; then
    tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
  fi
  echo "build: $(( $(date +%s) - t0 )) s"
  TESTS=$(built 1)
  BENCHBIN=$(built 2)
  [[ -x "$TESTS" ]] || { echo "no GoogleTest here: the CUDA tests were not built"; exit 1; }
  BUILD_PID=""
fi

# One process per suite: a kernel fault poisons its CUDA context, not the other suites.
t0=$(date +%s)
test_rc=0
: > "$OUT/tests.log"
# The last entry runs every suite the others do not name (new suites are never left out).
for suite in 'CudaAllocator.*:CudaElementwise.*' 'CudaLinear.*' 'CudaLinearFp8.*' 'CudaMoe.*' 'CudaMoeFp8.*' 'CudaMla.*' \
             'CudaSampling.*' \
             '-CudaAllocator.*:CudaElementwise.*:CudaLinear.*:CudaLinearFp8.*:CudaMoe.*:CudaMoeFp8.*:CudaMla.*:CudaSampling.*'; do
  timeout 120 "$TESTS" --gtest_color=no --gtest_filter="$suite" >> "$OUT/tests.log" 2>&1
  rc=$?
  echo "suite $suite: rc=$rc"
  if [[ $rc -ne 0 ]]; then
    test_rc=1
    if [[ $rc -ge 124 ]] && command -v compute-sanitizer > /dev/null; then
      timeout 90 compute-sanitizer --print-limit 20 "$TESTS" --gtest_filter="$suite" >> "$OUT/sanitizer.log" 2>&1
    fi
  fi
done
echo "tests: $(( $(date +%s) - t0 )) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|RelErr|FP8 GEMM path|Check failed|CUDA" "$OUT/tests.log" | head -40

if [[ $BENCH -eq 1 ]]; then
  t0=$(date +%s)
  timeout 240 "$BENCHBIN" > "$OUT/bench.log" 2>&1 || echo "bench rc=$?"
  echo "bench: $(( $(date +%s) - t0 )) s"
  t0=$(date +%s)
  timeout 120 python3 tools/gpu/torch_ref.py > "$OUT/torch.log" 2>&1 || echo "torch rc=$?"
  echo "torch: $(( $(date +%s) - t0 )) s"
  python3 tools/gpu/report.py "$OUT/bench.log" "$OUT/torch.log" | tee "$OUT/report.md"
fi
# With --prebuilt the build here ran alongside; it must succeed too.
if [[ -n "$BUILD_PID" ]]; then
  if wait "$BUILD_PID"; then
    echo "build here: ok ($(built 1) $(built 2))"
  else
    echo "build here: FAILED"; tail -20 "$OUT/build.log"; test_rc=1
  fi
fi
exit $test_rc
