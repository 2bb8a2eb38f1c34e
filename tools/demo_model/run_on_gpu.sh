#!/usr/bin/env bash
# Builds the demo model end to end on a GPU host with torch, transformers and tokenizers (no network).
#
#   0. SMOKE: the whole pipeline on a small data set (data, tokenizer, a few seconds of training with
#      the MTP layer, save, reload, a small evaluation of every kind) under --strict; any failure
#      aborts the script before the real run spends GPU time. Meanwhile the full data set is
#      generated in the background.
#   1. data: the template problems (the held-out split must equal tests/fixtures/demo/test.jsonl, the
#      first 1,000 train lines tests/fixtures/demo/train.jsonl) and the paraphrased problems; the
#      held-out chat questions' skeletons are checked against all of it (in the background).
#   2. the committed byte-level BPE tokenizer is kept and its config written with the chat template
#      (REUSE_TOKENIZER= trains a new one instead);
#   3. the model and its MTP layer train for BUDGET seconds of wall clock, are saved, reloaded and
#      evaluated (3-shot, chat, held-out chat questions, tool calls, MTP acceptance).
#
# Everything lands in $OUT (7 files): run.log, report.json, eval_samples.jsonl (the 3-shot greedy
# responses: tests/fixtures/demo/transformers_greedy_3shot.jsonl), chat_outputs.jsonl,
# chat_heldout_outputs.jsonl, tool_outputs.jsonl and demo-deepseek-v3.tar.gz (the model folder);
# smoke_report.json as well when the smoke run fails.
#
# usage: OUT=/some/dir [BUDGET=240] [TRAIN_SIZE=300000] [PARAPHRASE_SIZE=150000] [SMOKE=1|0|only]
#        [REUSE_TOKENIZER=path or empty] bash tools/demo_model/run_on_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/demo_out}
BUDGET=${BUDGET:-240}
TRAIN_SIZE=${TRAIN_SIZE:-300000}
PARAPHRASE_SIZE=${PARAPHRASE_SIZE:-150000}
SMOKE=${SMOKE:-1}
WORK=${WORK:-/tmp/demo_work}
# The committed tokenizer.json is kept (the vocabulary does not change) unless REUSE_TOKENIZER is empty.
REUSE_TOKENIZER=${REUSE_TOKENIZER-$ROOT/models/demo-deepseek-v3/tokenizer.json}
FIX="$ROOT/tests/fixtures/demo"
MODEL="$WORK/demo-deepseek-v3"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TOKENIZERS_PARALLELISM=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
rm -f "$OUT"/smoke_report.json
rm -rf "$WORK"
mkdir -p "$WORK/data" "$MODEL"

say() { echo "[run_on_gpu $(date -u +%H:%M:%S)] $*"; }

tokenizer() {  # tokenizer DATA_TRAIN_JSONL OUT_DIR
  if [ -n "$REUSE_TOKENIZER" ]; then
    timeout 150 python3 "$HERE/train_tokenizer.py" --reuse "$REUSE_TOKENIZER" --out "$2"
  else
    timeout 150 python3 "$HERE/train_tokenizer.py" --train "$1" --out "$2"
  fi
}

train() {  # train DATA MODEL_DIR OUT_DIR BUDGET_S TIMEOUT_S [extra train.py arguments]
  local data=$1 dir=$2 out=$3 budget=$4 limit=$5
  shift 5
  timeout "$limit" python3 "$HERE/train.py" --data "$data" --fewshot "$FIX/train.jsonl" \
    --chat "$FIX/chat.jsonl" --model-dir "$dir" --budget-s "$budget" \
    --report "$out/report.json" --samples "$out/eval_samples.jsonl" --chat-out "$out/chat_outputs.jsonl" \
    --tools "$FIX/tool_calls.jsonl" --tool-out "$out/tool_outputs.jsonl" \
    --chat-heldout "$FIX/chat_heldout.jsonl" --chat-heldout-out "$out/chat_heldout_outputs.jsonl" "$@"
}

# The saved folder must hold what Fission loads: the target, the NextN layer model.layers.{L}.*, and
# num_nextn_predict_layers 1 (read from the safetensors header, no torch needed).
check_checkpoint() {  # check_checkpoint MODEL_DIR
  python3 - "$1" <<'EOF'
import json, struct, sys
d = sys.argv[1]
cfg = json.load(open(f"{d}/config.json"))
L = cfg["num_hidden_layers"]
with open(f"{d}/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    names = set(json.loads(f.read(n))) - {"__metadata__"}
need = [f"model.layers.{L}.{t}" for t in ("enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight",
        "shared_head.head.weight", "embed_tokens.weight", "input_layernorm.weight", "post_attention_layernorm.weight",
        "self_attn.q_a_proj.weight", "self_attn.kv_a_proj_with_mqa.weight", "self_attn.kv_b_proj.weight",
        "self_attn.o_proj.weight", "mlp.gate.weight", "mlp.gate.e_score_correction_bias",
        "mlp.shared_experts.gate_proj.weight", "mlp.experts.0.gate_proj.weight",
        f"mlp.experts.{cfg['n_routed_experts'] - 1}.down_proj.weight")]
missing = [t for t in need if t not in names]
mtp = sorted(t for t in names if t.startswith(f"model.layers.{L}."))
print(json.dumps({"tensors": len(names), "mtp_tensors": len(mtp), "num_nextn_predict_layers": cfg.get("num_nextn_predict_layers"),
                  "missing": missing}))
sys.exit(0 if not missing and cfg.get("num_nextn_predict_layers") == 1 else 1)
EOF
}

smoke() {
  local S="$WORK/smoke"
  mkdir -p "$S/data" "$S/model" "$S/out"
  say "SMOKE: data (3,000 template and 2,000 paraphrased problems)"
  timeout 60 python3 "$HERE/make_data.py" --out "$S/data" --train-size 3000 --paraphrase-size 2000 || return 1
  say "SMOKE: tokenizer"
  tokenizer "$S/data/train.jsonl" "$S/model" > "$S/tokenizer.log" 2>&1 || { cat "$S/tokenizer.log"; return 1; }
  say "SMOKE: train 6 s with the MTP layer, save, reload, evaluate 8 of each"
  train "$S/data" "$S/model" "$S/out" 6 240 --chat-pool 600 --eval-limit 8 --log-every 2 --val-every 4 \
    --unpadded-check 1 --strict > "$S/train.log" 2>&1
  local rc=$?
  cat "$S/train.log"
  cp "$S/out/report.json" "$WORK/smoke_report.json" 2>/dev/null
  [ $rc -eq 0 ] || { say "SMOKE: train.py exit status $rc"; return 1; }
  say "SMOKE: checkpoint"
  check_checkpoint "$S/model" || return 1
  python3 - "$S/out/report.json" <<'EOF' || return 1
import json, sys
r = json.load(open(sys.argv[1]))
need = {"reload": r.get("reload", {}).get("ok"), "mtp reload": r.get("reload", {}).get("mtp", {}).get("ok"),
        "3-shot eval": "flexible_extract" in r.get("eval", {}), "chat": "chat_correct" in r.get("chat", {}),
        "held-out chat": "accuracy" in r.get("chat_heldout", {}), "chat test": "accuracy" in r.get("chat_test", {}),
        "MTP acceptance": "accept_rate" in r.get("mtp", {}).get("acceptance_3shot", {}),
        "tools": "tool_call_accuracy" in r.get("tools", {}), "no failures": not r.get("failures")}
print("smoke report:", json.dumps(need))
sys.exit(0 if all(need.values()) else 1)
EOF
  for f in eval_samples.jsonl chat_outputs.jsonl chat_heldout_outputs.jsonl tool_outputs.jsonl; do
    [ -s "$S/out/$f" ] || { say "SMOKE: $f is missing or empty"; return 1; }
  done
  # the main run reuses the smoke run's tokenizer files when the committed vocabulary is kept
  if [ -n "$REUSE_TOKENIZER" ]; then cp "$S/model/tokenizer.json" "$S/model/tokenizer_config.json" "$MODEL/"; fi
  say "SMOKE: passed"
}

main() {
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  timeout 120 python3 -c 'import sys, torch, transformers, tokenizers, safetensors; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__, "cuda", torch.cuda.is_available())' || { say "ABORT: python packages"; return 1; }

  # the full data set, in the background while the smoke run goes
  timeout 300 python3 "$HERE/make_data.py" --out "$WORK/data" --train-size "$TRAIN_SIZE" \
    --paraphrase-size "$PARAPHRASE_SIZE" > "$WORK/data.log" 2>&1 &
  local data_pid=$!

  if [ "$SMOKE" != 0 ]; then
    local t=$SECONDS
    smoke || { say "ABORT: the smoke run failed (above); nothing was trained"; kill "$data_pid" 2>/dev/null; return 1; }
    say "smoke run took $((SECONDS - t)) s"
    if [ "$SMOKE" = only ]; then kill "$data_pid" 2>/dev/null; return 0; fi
  fi

  echo "== data"
  wait "$data_pid" || { cat "$WORK/data.log"; say "ABORT: make_data.py failed"; return 1; }
  cat "$WORK/data.log"
  for f in test.jsonl chat.jsonl tool_calls.jsonl; do
    if cmp -s "$WORK/data/$f" "$FIX/$f"; then echo "$f equals the fixture"; else echo "WARNING: $f differs from the fixture"; fi
  done
  n=$(wc -l < "$FIX/train.jsonl")
  if head -n "$n" "$WORK/data/train.jsonl" | cmp -s - "$FIX/train.jsonl"; then
    echo "the first $n train lines equal the fixture"
  else
    echo "WARNING: train head differs from the fixture"
  fi
  # the held-out chat questions stay held out (checked while the model trains)
  timeout 600 python3 "$HERE/check_heldout_skeletons.py" --data "$WORK/data" --tool-samples 20000 \
    > "$WORK/heldout_check.log" 2>&1 &
  local check_pid=$!

  echo "== tokenizer"
  if [ ! -s "$MODEL/tokenizer.json" ]; then
    tokenizer "$WORK/data/train.jsonl" "$MODEL" || { say "ABORT: tokenizer"; return 1; }
  else
    echo "the smoke run's tokenizer files (from $REUSE_TOKENIZER)"
  fi

  echo "== model"
  train "$WORK/data" "$MODEL" "$OUT" "$BUDGET" $((BUDGET + 300))
  echo "train.py exit status $?"
  ls -la "$MODEL"
  check_checkpoint "$MODEL" || echo "WARNING: the checkpoint lacks what Fission's draft layer needs"

  echo "== held-out chat skeleton check"
  wait "$check_pid"
  local crc=$?
  cat "$WORK/heldout_check.log"
  [ $crc -eq 0 ] || echo "WARNING: the held-out skeleton check failed (exit status $crc)"
  date -u
}

start=$SECONDS
main 2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ] && [ -f "$WORK/smoke_report.json" ] && [ ! -f "$OUT/report.json" ]; then
  cp "$WORK/smoke_report.json" "$OUT/smoke_report.json"
fi
if [ -s "$MODEL/model.safetensors" ]; then
  tar -C "$WORK" -czf "$OUT/demo-deepseek-v3.tar.gz" demo-deepseek-v3 2>&1 | tee -a "$OUT/run.log"
fi
ls -la "$OUT" 2>&1 | tee -a "$OUT/run.log"
echo "run_on_gpu.sh: exit status $rc after $((SECONDS - start)) s" | tee -a "$OUT/run.log"
exit "$rc"
