#!/usr/bin/env bash
# Runs the golden-output scripts on the GPU host (torch + transformers, no network) and packs the
# results into $OUT as tarballs (the device tool brings back few files).
#   tools/gpu/make_goldens.sh models      -> $OUT/models.tar.gz
#   tools/gpu/make_goldens.sh tokenizer   -> $OUT/tokenizer.tar.gz (needs .carry/ with inputs)
#   tools/gpu/make_goldens.sh ops         -> $OUT/op_goldens.safetensors (the operation table's torch outputs)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
python3 -c 'import torch, transformers, tokenizers, safetensors; print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__)'
for what in "$@"; do
  case "$what" in
    models)
      rm -rf /tmp/golden_models && mkdir -p /tmp/golden_models
      python3 tools/golden/make_model_goldens.py --out /tmp/golden_models 2>&1 | tee "$OUT/models.log"
      tar -C /tmp/golden_models -czf "$OUT/models.tar.gz" . ;;
    tokenizer)
      rm -rf /tmp/golden_tok && mkdir -p /tmp/golden_tok
      python3 tools/golden/make_tokenizer_goldens.py \
        --tokenizer-dir deepseek_v3=.carry/tokenizers/deepseek_v3 \
        --tokenizer-dir qwen3=.carry/tokenizers/qwen3 \
        --gsm8k-dir .carry/gsm8k --out /tmp/golden_tok 2>&1 | tee "$OUT/tokenizer.log"
      tar -C /tmp/golden_tok -czf "$OUT/tokenizer.tar.gz" . ;;
    ops)
      python3 tools/golden/make_op_goldens.py --out "$OUT/op_goldens.safetensors" 2>&1 | tee "$OUT/ops.log" ;;
    *) echo "unknown: $what"; exit 2 ;;
  esac
done
ls -la "$OUT"
