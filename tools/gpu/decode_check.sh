#!/usr/bin/env bash
# A decode-path change checked on one GPU in one call: the CUDA tests of the operations a decode
# step runs, then the decode rates of the new build against a reference build in the same
# invocation (Moonlight-16B-A3B's dimensions bf16 and FP8 at batch 1 and 64, DeepSeek-V3's with 4
# layers FP8), then both builds' kernel profiles of a batch-1 and a batch-64 bf16 step, the new one
# beside the reference kernel by kernel; stage `attention` (not a default) runs both builds' MLA
# attention benchmarks with torch's SDPA and the 16-head decode kernel alone under Nsight Compute
# (tools/gpu/attention_table.py). Measurements are not tests; the tests' results lead the
# summary. Each stage's logs are packed into $OUT/logs.tgz as it ends, beside $OUT/summary.txt (a
# call cut short still returns what ran; the logs themselves stay outside $OUT, in LOGS, since a
# device call brings back at most 8 files).
#
#   usage: bash tools/gpu/decode_check.sh NEWBIN REFBIN
#   NEWBIN holds fission and tests/fission_{kernels,model}_cuda_tests (tools/gpu/pack.sh); REFBIN
#   at least fission. Environment: OUT (default ./gpu-out), STAGES (default "tests rates v3 profile"),
#   REF_PROFILES=0 (profile the new build alone: half the profile stage's time), LOGS (the logs'
#   folder, default /tmp/decode_check/logs).
set -uo pipefail
cd "$(dirname "$0")/../.."
NEW=$1
REF=$2
RESULTS=${OUT:-$PWD/gpu-out}
L=${LOGS:-/tmp/decode_check/logs}
mkdir -p "$L" "$RESULTS"
export NCCL_NVLS_ENABLE=0 FISSION_SOURCE_DIR=$PWD
export LD_LIBRARY_PATH=$PWD/$NEW/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# The test binaries look for the source and build folders they were compiled in (as session.sh).
SRC_PATH=${FISSION_BUILT_SOURCE_DIR:-/work/main}
[[ -e $SRC_PATH/src ]] || { mkdir -p "$(dirname "$SRC_PATH")" && ln -sfn "$PWD" "$SRC_PATH"; }
BUILT_IN=$(cat "$NEW/BUILD_DIR" 2>/dev/null || echo build)
[[ -e $BUILT_IN ]] || ln -sfn "$NEW" "$BUILT_IN"
S=$L/summary.txt
pack() { tar czf "$RESULTS/logs.tgz" -C "$(dirname "$L")" "$(basename "$L")" && cp "$S" "$RESULTS/summary.txt"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; head -1 "$NEW/COMMIT"; } >> "$S" 2>&1

tests() {
  local t
  t=$(date +%s)
  timeout 150 "$NEW/tests/fission_kernels_cuda_tests" \
    --gtest_filter='CudaElementwise*:CudaLinear*:CudaMoe*:CudaMla*:CudaDsa.SparseMla*:CudaV4Streams*' \
    > "$L/kernel_tests.log" 2>&1
  echo "kernel tests rc=$? in $(( $(date +%s) - t )) s" >> "$S"
  t=$(date +%s)
  timeout 300 "$NEW/tests/fission_model_cuda_tests" --gtest_filter='CudaGraphs.*:CudaModel.*:CudaSparseModel.*:CudaV4*' \
    > "$L/model_tests.log" 2>&1
  echo "model tests rc=$? in $(( $(date +%s) - t )) s" >> "$S"
  grep -hE '^\[  (PASSED|FAILED)|Failure|kernels and .* per MoE layer|bit-identical' "$L/kernel_tests.log" \
    "$L/model_tests.log" | head -40 >> "$S"
}

rates() {
  OUT=$L bash tools/gpu/decode_bench.sh "$NEW" "$REF" > /dev/null 2>&1
  cp "$L/decode_bench.log" "$L/decode_moonlight.log" && cat "$L/decode_moonlight.log" >> "$S"
}

v3() {
  OUT=$L MODEL=bench/configs/deepseek-v3 LAYERS=4 EXTRA='"first_k_dense_replace": 1' WEIGHTS=fp8 OUTPUT=128 \
    bash tools/gpu/decode_bench.sh "$NEW" "$REF" > /dev/null 2>&1
  cp "$L/decode_bench.log" "$L/decode_v3.log" && cat "$L/decode_v3.log" >> "$S"
}

profile() {
  local batch input
  for batch in 1 64; do
    input=$([[ $batch == 1 ]] && echo 200 || echo 32)
    [[ ${REF_PROFILES:-1} == 1 ]] &&
      OUT=$L LIMIT=150 BATCH=$batch INPUT=$input bash tools/gpu/kernel_profile.sh "$REF" "ref_b$batch" > /dev/null 2>&1
    OUT=$L LIMIT=150 BATCH=$batch INPUT=$input REF_CSV=$([[ ${REF_PROFILES:-1} == 1 ]] && echo "$L/kernels_ref_b$batch.csv") \
      bash tools/gpu/kernel_profile.sh "$NEW" "new_b$batch" > /dev/null 2>&1
    grep -h "last decode\|reference" "$L/kernels_new_b$batch.log" >> "$S"
  done
}

attention() {
  local b hbm ncu
  case $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) in
    *H100*) hbm=3350 ;;
    *) hbm=4800 ;;
  esac
  for b in new ref; do
    local bin=$NEW
    [[ $b == ref ]] && bin=$REF
    [[ -x $bin/fission_cuda_bench ]] && timeout 150 "$bin/fission_cuda_bench" decode prefill > "$L/attention_$b.log" 2>&1
  done
  timeout 90 python3 tools/gpu/torch_ref.py prefill > "$L/sdpa.log" 2>&1
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  # The fourth launch of the decode kernel is inside the first case (64 sequences x 4K, 16 heads).
  [[ -n $ncu ]] && timeout 60 "$ncu" --kernel-name regex:FlashKernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight "$NEW/fission_cuda_bench" decode > "$L/attention_ncu.log" 2>&1
  python3 tools/gpu/attention_table.py "$L/attention_new.log" --ref "$L/attention_ref.log" --sdpa "$L/sdpa.log" \
    --ncu "$L/attention_ncu.log" --hbm "$hbm" --title "MLA attention, new $(head -1 "$NEW/COMMIT" 2>/dev/null), reference $(head -1 "$REF/COMMIT" 2>/dev/null)" >> "$S"
}

for stage in ${STAGES:-tests rates v3 profile}; do
  "$stage"
  pack
done
cat "$S"
