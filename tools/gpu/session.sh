#!/usr/bin/env bash
# One device session: runs the named GPU stages in order with binaries built on the development
# host and carried over (the H200 image has CUDA and NCCL but not PCRE2 or nlohmann-json, so the
# project is built elsewhere with the same CUDA major version). Every stage logs under $OUT.
#
#   usage: bash tools/gpu/session.sh BINDIR TOKENIZER_DIR STAGE...
#   BINDIR: fission, fission_cuda_bench, fission_comm_bench, tests/fission_*_tests, lib/*.so, COMMIT
#   stages: model   tools/gpu/model_check.sh (model tests, generate across devices/layouts, kernel tests)
#           serve   tools/gpu/serve_check.sh (the server's integration tests on CUDA)
#           e2e     tools/gpu/serve_bench.sh, FP8 weights (concurrency 1 and 64, TPOT vs roofline)
#           e2e-bf16  the same with bf16 weights
#           e2e-eager the FP8 run with --disable-cuda-graph (the side-by-side reference for graphs)
#           graphs  tools/gpu/graph_check.sh (CUDA graph replays against eager steps)
#           spec    tools/gpu/spec_bench.sh (speculative decoding's TPOT, NEXTN 1 and 3 steps accepting
#                   every draft, batch 1 and 16, graphs against eager)
#           kernels tools/gpu/check.sh --prebuilt (kernel tests, kernel benchmarks, torch reference)
#           kernel-tests  the kernel tests alone
#           ops     the operation table: torch goldens made here, the CPU reference against them, CUDA
#                   against the CPU, and the perf mode (op_goldens.safetensors comes back in $OUT)
#           bench-lite    fission_cuda_bench gemm fp8 decode moe_fp8 (no torch reference)
#           dsa     DeepSeek Sparse Attention: the CUDA kernel tests of the indexer, its top-k and sparse
#                   MLA (CudaDsa*, and the operation table), then fission_cuda_bench's dsa_topk,
#                   dsa_indexer, dsa_sparse_decode and dsa_sparse_prefill (logs: stage_dsa_tests.txt,
#                   bench_dsa.log)
#           comm    fission_comm_bench: collective time per layer, TP2 and TP2 x CP2
#           pcp     tools/gpu/pcp_bench.sh (TTFT, TP2 against TP2 x CP2)
#           multinode tools/gpu/multinode_check.sh (two processes, one GPU each)
#           profile tools/gpu/profile_step.sh (per-operation device time, batch 1 and 64)
set -uo pipefail
cd "$(dirname "$0")/../.."
# Every log goes under $OUT/logs and is packed into $OUT/logs.tgz at the end (the device returns
# only a few files).
RESULTS=${OUT:-$PWD/gpu-out}
export OUT=$RESULTS/logs
mkdir -p "$OUT"
BIN=$1
TOK=$2
shift 2
export NCCL_NVLS_ENABLE=0
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${NCCL_DIR:-}:${LD_LIBRARY_PATH:-}
# The test binaries were compiled with the development host's source and build paths: link them.
SRC_PATH=${FISSION_BUILT_SOURCE_DIR:-/work/main}
if [[ ! -e $SRC_PATH/src ]]; then mkdir -p "$(dirname "$SRC_PATH")" && ln -sfn "$PWD" "$SRC_PATH"; fi
BUILT_IN=$(cat "$BIN/BUILD_DIR" 2>/dev/null || echo build)
[[ -e $BUILT_IN ]] || ln -sfn "$BIN" "$BUILT_IN"
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; cat "$BIN/COMMIT"; } > "$OUT/session_env.txt" 2>&1
cat "$OUT/session_env.txt"
for stage in "$@"; do
  t=$(date +%s)
  case $stage in
    model) MODEL_TESTS_TIMEOUT=240 bash tools/gpu/model_check.sh "$BIN" > "$OUT/stage_model.txt" 2>&1 ;;
    serve) bash tools/gpu/serve_check.sh "$BIN" > "$OUT/stage_serve.txt" 2>&1 ;;
    e2e) timeout 420 bash tools/gpu/serve_bench.sh "$BIN" "$TOK" 4 fp8 > "$OUT/stage_e2e.txt" 2>&1 ;;
    e2e-eager) SERVER_FLAGS=--disable-cuda-graph TAG=fp8_eager timeout 420 bash tools/gpu/serve_bench.sh "$BIN" "$TOK" 4 fp8 \
                 > "$OUT/stage_e2e_eager.txt" 2>&1 ;;
    graphs) timeout 420 bash tools/gpu/graph_check.sh "$BIN" > "$OUT/stage_graphs.txt" 2>&1 ;;
    spec) timeout 300 bash tools/gpu/spec_bench.sh "$BIN" > "$OUT/stage_spec.txt" 2>&1 ;;
    e2e-bf16) timeout 420 bash tools/gpu/serve_bench.sh "$BIN" "$TOK" 4 bf16 > "$OUT/stage_e2e_bf16.txt" 2>&1 ;;
    kernels) bash tools/gpu/check.sh --prebuilt "$BIN" --no-build > "$OUT/stage_kernels.txt" 2>&1 ;;
    bench-lite) timeout 300 "$BIN/fission_cuda_bench" gemm fp8 decode moe_fp8 > "$OUT/bench_lite.log" 2>&1 ;;
    dsa) timeout 420 "$BIN/tests/fission_kernels_cuda_tests" --gtest_filter='CudaDsa*:CudaOpTable*' \
           > "$OUT/stage_dsa_tests.txt" 2>&1
         echo "dsa tests: rc $?" >> "$OUT/stages.txt"
         timeout 420 "$BIN/fission_cuda_bench" dsa_topk dsa_indexer dsa_sparse_decode dsa_sparse_prefill \
           > "$OUT/bench_dsa.log" 2>&1 ;;
    kernel-tests) bash tools/gpu/check.sh --prebuilt "$BIN" --no-build --no-bench > "$OUT/stage_kernel_tests.txt" 2>&1 ;;
    ops) { OUT=$RESULTS bash tools/gpu/make_goldens.sh ops && mkdir -p tests/fixtures/ops &&
           cp "$RESULTS/op_goldens.safetensors" tests/fixtures/ops/ &&
           FISSION_SOURCE_DIR=$PWD "$BIN/tests/fission_kernels_tests" --gtest_filter='OpTable*' &&
           "$BIN/tests/fission_kernels_cuda_tests" --gtest_filter='CudaOpTable*' &&
           timeout 120 "$BIN/fission_cuda_bench" ops; } > "$OUT/stage_ops.txt" 2>&1 ;;
    comm) timeout 180 "$BIN/fission_comm_bench" 2 1 > "$OUT/comm_bench.log" 2>&1
          timeout 180 "$BIN/fission_comm_bench" 2 2 >> "$OUT/comm_bench.log" 2>&1 ;;
    pcp) bash tools/gpu/pcp_bench.sh "$BIN" 4 > "$OUT/stage_pcp.txt" 2>&1 ;;
    multinode) timeout 300 bash tools/gpu/multinode_check.sh "$BIN" > "$OUT/stage_multinode.txt" 2>&1 ;;
    profile) timeout 300 bash tools/gpu/profile_step.sh "$BIN" > "$OUT/stage_profile.txt" 2>&1 ;;
    *) echo "unknown stage $stage" ;;
  esac
  echo "stage $stage: rc $? in $(( $(date +%s) - t )) s" | tee -a "$OUT/stages.txt"
done
cp "$OUT/stages.txt" "$RESULTS/stages.txt"
tar czf "$RESULTS/logs.tgz" -C "$RESULTS" logs && rm -rf "$OUT"
