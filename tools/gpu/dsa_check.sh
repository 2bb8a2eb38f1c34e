#!/usr/bin/env bash
# DeepSeek Sparse Attention on the GPU host, in one invocation: the whole-model CUDA tests (the DSA
# fixtures against transformers, real-size dummy configs, decode graphs with the indexer, and the
# dense families' tests beside them), the DSA kernel tests and the operation table, then the TTFT
# benchmark (tools/gpu/dsa_ttft.sh). Logs under $OUT.
#
#   usage: bash tools/gpu/dsa_check.sh BINDIR [LAYERS]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=$1
export FISSION_SOURCE_DIR=$PWD NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
t=$(date +%s)
timeout "${MODEL_TESTS_TIMEOUT:-240}" "$BIN/tests/fission_model_cuda_tests" > "$OUT/dsa_model_cuda.log" 2>&1
echo "model_cuda tests: rc $? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/dsa_model_cuda.log" | tr '\n' ' ')) $(( $(date +%s) - t ))s"
grep -E "worst relative|every key selected|ran$|bit-identical|FAILED" "$OUT/dsa_model_cuda.log" | head -40
t=$(date +%s)
timeout 180 "$BIN/tests/fission_kernels_cuda_tests" --gtest_filter='CudaDsa*:CudaOpTable*:*LayerNorm*' > "$OUT/dsa_kernels.log" 2>&1
echo "kernel tests: rc $? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/dsa_kernels.log" | tr '\n' ' ')) $(( $(date +%s) - t ))s"
bash tools/gpu/dsa_ttft.sh "$BIN" "${2:-4}"
