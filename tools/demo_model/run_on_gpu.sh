#!/usr/bin/env bash
# Builds the demo model end to end on a GPU host with torch, transformers and tokenizers (no network):
#   1. generates the synthetic data (the held-out split must equal tests/fixtures/demo/test.jsonl),
#   2. keeps the committed byte-level BPE tokenizer and writes its config with the chat template
#      (REUSE_TOKENIZER= trains a new one instead),
#   3. trains the model for BUDGET seconds of wall clock, saves it, reloads it and evaluates it.
# Everything lands in $OUT: run.log, report.json, eval_samples.jsonl, chat_outputs.jsonl,
# tool_outputs.jsonl and demo-deepseek-v3.tar.gz (the model folder).
#
# usage: OUT=/some/dir [BUDGET=220] [TRAIN_SIZE=300000] [REUSE_TOKENIZER=path or empty] bash tools/demo_model/run_on_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/demo_out}
BUDGET=${BUDGET:-220}
TRAIN_SIZE=${TRAIN_SIZE:-300000}
WORK=${WORK:-/tmp/demo_work}
# The committed tokenizer.json is kept (the vocabulary does not change) unless REUSE_TOKENIZER is empty.
REUSE_TOKENIZER=${REUSE_TOKENIZER-$ROOT/models/demo-deepseek-v3/tokenizer.json}
FIX="$ROOT/tests/fixtures/demo"
MODEL="$WORK/demo-deepseek-v3"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TOKENIZERS_PARALLELISM=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
rm -rf "$WORK"
mkdir -p "$WORK/data" "$MODEL"

main() {
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c 'import sys, torch, transformers, tokenizers, safetensors; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__)'

  echo "== data"
  python3 "$HERE/make_data.py" --out "$WORK/data" --train-size "$TRAIN_SIZE" || return 1
  for f in test.jsonl chat.jsonl tool_calls.jsonl; do
    if cmp -s "$WORK/data/$f" "$FIX/$f"; then echo "$f equals the fixture"; else echo "WARNING: $f differs from the fixture"; fi
  done
  n=$(wc -l < "$FIX/train.jsonl")
  if head -n "$n" "$WORK/data/train.jsonl" | cmp -s - "$FIX/train.jsonl"; then
    echo "the first $n train lines equal the fixture"
  else
    echo "WARNING: train head differs from the fixture"
  fi

  echo "== tokenizer"
  if [ -n "$REUSE_TOKENIZER" ]; then
    timeout 150 python3 "$HERE/train_tokenizer.py" --reuse "$REUSE_TOKENIZER" --out "$MODEL" || return 1
  else
    timeout 150 python3 "$HERE/train_tokenizer.py" --train "$WORK/data/train.jsonl" --out "$MODEL" || return 1
  fi

  echo "== model"
  timeout $((BUDGET + 210)) python3 "$HERE/train.py" --data "$WORK/data" --fewshot "$FIX/train.jsonl" \
    --chat "$FIX/chat.jsonl" --model-dir "$MODEL" --budget-s "$BUDGET" \
    --report "$OUT/report.json" --samples "$OUT/eval_samples.jsonl" --chat-out "$OUT/chat_outputs.jsonl" \
    --tools "$FIX/tool_calls.jsonl" --tool-out "$OUT/tool_outputs.jsonl"
  echo "train.py exit status $?"
  ls -la "$MODEL"
  date -u
}

main 2>&1 | tee "$OUT/run.log"
tar -C "$WORK" -czf "$OUT/demo-deepseek-v3.tar.gz" demo-deepseek-v3 2>&1 | tee -a "$OUT/run.log"
ls -la "$OUT" 2>&1 | tee -a "$OUT/run.log"
