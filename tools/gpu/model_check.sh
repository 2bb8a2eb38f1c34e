#!/usr/bin/env bash
# The model on the GPU host, in one invocation: the whole-model CUDA tests
# (golden parity, CUDA vs CPU, NCCL layouts against one GPU when there are GPUs enough), and
# `fission generate` with greedy decoding on the tiny fixtures and the demo model: cpu, cuda, and
# (with two GPUs or more) --tp-size 2 and --tp-size 2 --attn-cp-size 2, whose output ids must equal
# the single-GPU run's; a load of dummy FP8 weights at DeepSeek-V3's real dimensions; then the
# CUDA kernel tests. Logs go to $OUT (or ./gpu-out): env.txt, kernels_cuda.log, model_cuda.log,
# generate.log, summary.txt.
#
#   usage: bash tools/gpu/model_check.sh [BINDIR]
#   BINDIR holds fission, fission_model_cuda_tests and fission_kernels_cuda_tests (built elsewhere
#   with the same CUDA major version) and optionally lib/ with shared libraries the host lacks;
#   default build-gpu (with tests/ under it).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=${1:-build-gpu}
TESTDIR=$BIN
[[ -x $BIN/tests/fission_model_cuda_tests ]] && TESTDIR=$BIN/tests
export NCCL_NVLS_ENABLE=0 FISSION_SOURCE_DIR=$PWD
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${NCCL_DIR:-}:${LD_LIBRARY_PATH:-}
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; echo "gpus: $GPUS"
  cat "$BIN/COMMIT" 2>/dev/null; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$BIN/fission" | grep -E "not found|nccl|cudart|cublas"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

t=$(date +%s)
timeout "${MODEL_TESTS_TIMEOUT:-300}" "$TESTDIR/fission_model_cuda_tests" > "$OUT/model_cuda.log" 2>&1
note "model_cuda tests: rc $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/model_cuda.log" | tr '\n' ' ')) $(( $(date +%s) - t ))s"
grep -E "worst relative|fp8 kept" "$OUT/model_cuda.log" | tee -a "$SUMMARY"

# Greedy generation: a few prompts of different lengths (one over the 512-token context-parallel
# threshold where the context length allows), random ids below the model's vocabulary, fixed seed.
prompts() { python3 tools/gpu/prompts.py "$1" 300; }
GEN=$OUT/generate.log
: > "$GEN"
# An FP8 checkpoint keeps its FP8 weights on the device unless --dtype float32 (activations are then
# quantized, so "--device cuda" may differ from cpu on tiny-deepseek-v3-fp8); the float32 run is the
# exact path and must give cpu's ids.
layouts=("--device cpu" "--device cuda --dtype float32" "--device cuda" "--device cuda --dtype bfloat16")
if (( GPUS >= 2 )); then layouts+=("--device cuda --tp-size 2" "--device cuda --tp-size 2 --attn-cp-size 2"); fi
for model in tests/fixtures/models/tiny-deepseek-v3 tests/fixtures/models/tiny-glm-routing \
             tests/fixtures/models/tiny-deepseek-v3-fp8 models/demo-deepseek-v3; do
  prompts "$model" > /tmp/prompts.jsonl
  for layout in "${layouts[@]}"; do
    name=$(echo "$layout" | tr -d ' -')
    echo "== $model $layout" >> "$GEN"
    timeout "${GENERATE_TIMEOUT:-120}" "$BIN/fission" generate --model-path "$model" --input /tmp/prompts.jsonl $layout \
      > "/tmp/gen_$name.out" 2>> "$GEN"
    rc=$?
    cat "/tmp/gen_$name.out" >> "$GEN"
    verdict=""
    for ref in devicecpu devicecuda; do
      [[ $ref == "$name" || ! -s /tmp/gen_$ref.out ]] && continue
      if [[ $rc -eq 0 ]] && cmp -s "/tmp/gen_$ref.out" "/tmp/gen_$name.out"; then
        verdict+=" identical ids to $ref;"
      else
        verdict+=" DIFFERENT from $ref;"
      fi
    done
    note "$model $layout: rc $rc,$verdict"
  done
  rm -f /tmp/gen_*.out
done
grep -E "prefill|decode" "$GEN" | head -40 >> "$SUMMARY"

# FP8 dummy weights drawn on the device at DeepSeek-V3's real dimensions (4 layers: 1 dense + 3 MoE
# with 256 experts each, about 40 GB on one GPU): the whole process should take seconds.
t=$(date +%s)
timeout "${GENERATE_TIMEOUT:-120}" "$BIN/fission" generate --model-path bench/configs/deepseek-v3 --load-format dummy \
  --json-model-override-args '{"num_hidden_layers": 4, "first_k_dense_replace": 1}' --device cuda --dtype bfloat16 \
  --prompt-ids 1,2,3,4,5,6,7,8 --max-new-tokens 8 --ignore-eos > /tmp/fp8_dummy.out 2> /tmp/fp8_dummy.err
note "DeepSeek-V3 dims, 4 layers, dummy FP8 weights, one GPU: rc $?, process $(( $(date +%s) - t )) s, ids $(tr '\n' ' ' < /tmp/fp8_dummy.out)"
grep -E "^(prefill|decode):|FP8" /tmp/fp8_dummy.err | tee -a "$SUMMARY"

# The kernel tests last: they ran on this host before (docs/cuda.md); the model is what is new.
t=$(date +%s)
timeout "${KERNEL_TESTS_TIMEOUT:-300}" "$TESTDIR/fission_kernels_cuda_tests" > "$OUT/kernels_cuda.log" 2>&1
note "kernels_cuda tests: rc $? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/kernels_cuda.log" | tr '\n' ' ')) $(( $(date +%s) - t ))s"
