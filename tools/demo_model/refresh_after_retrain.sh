#!/usr/bin/env bash
# Installs a retrained demo model and the fixtures that come from its GPU run, then prints what is
# left to do by hand (tools/demo_model/REFRESH.md lists every test, fixture and doc that pins the
# model's outputs or scores).
#
# usage: tools/demo_model/refresh_after_retrain.sh MODEL_TARBALL GPU_OUT_DIR
#   MODEL_TARBALL  demo-deepseek-v3.tar.gz from run_on_gpu.sh's $OUT
#   GPU_OUT_DIR    that $OUT: run.log, report.json, eval_samples.jsonl, chat_outputs.jsonl,
#                  chat_heldout_outputs.jsonl, tool_outputs.jsonl
# FORCE=1 installs even when the run's report lists failures.
#
# It writes: models/demo-deepseek-v3/{config.json, generation_config.json, model.safetensors,
# tokenizer.json, tokenizer_config.json} (README.md is kept: update it by hand),
# tests/fixtures/demo/transformers_greedy_3shot.jsonl (from eval_samples.jsonl) and
# tools/demo_model/results/ (the run's log, report and outputs). The data fixtures (test.jsonl,
# train.jsonl, chat.jsonl, tool_calls.jsonl, chat_heldout.jsonl) do not come from the GPU run and
# are left alone; run_on_gpu.sh's log says whether its data equalled them.
set -euo pipefail
if [ $# -ne 2 ]; then sed -n '2,19p' "$0"; exit 2; fi
TARBALL=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
GPU_OUT=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODEL="$ROOT/models/demo-deepseek-v3"
FIX="$ROOT/tests/fixtures/demo"
RESULTS="$HERE/results"

for f in run.log report.json eval_samples.jsonl chat_outputs.jsonl; do
  [ -s "$GPU_OUT/$f" ] || { echo "refresh: $GPU_OUT/$f is missing or empty" >&2; exit 1; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
tar -C "$TMP" -xzf "$TARBALL"
NEW="$TMP/demo-deepseek-v3"
for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
  [ -s "$NEW/$f" ] || { echo "refresh: the tarball has no demo-deepseek-v3/$f" >&2; exit 1; }
done

# The run must have saved, reloaded and evaluated cleanly, and the checkpoint must carry the NextN layer.
python3 - "$GPU_OUT/report.json" "$NEW" "${FORCE:-0}" <<'EOF'
import json, struct, sys
report, new, force = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
r = json.load(open(report))
cfg = json.load(open(f"{new}/config.json"))
L = cfg["num_hidden_layers"]
with open(f"{new}/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    names = set(json.loads(f.read(n))) - {"__metadata__"}
mtp = [t for t in names if t.startswith(f"model.layers.{L}.")]
problems = list(r.get("failures") or [])
if not r.get("reload", {}).get("ok"):
    problems.append("the reload check failed")
if cfg.get("num_nextn_predict_layers") != 1 or not mtp:
    problems.append(f"no NextN layer (num_nextn_predict_layers {cfg.get('num_nextn_predict_layers')}, {len(mtp)} tensors)")
if problems:
    print("refresh: the run is not clean:", "; ".join(problems), file=sys.stderr)
    if not force:
        print("refresh: not installing (FORCE=1 overrides)", file=sys.stderr)
        sys.exit(1)
print(f"checkpoint: {len(names)} tensors ({len(mtp)} in the NextN layer model.layers.{L}.*), "
      f"num_nextn_predict_layers {cfg.get('num_nextn_predict_layers')}")
EOF

if ! cmp -s "$NEW/tokenizer.json" "$MODEL/tokenizer.json"; then
  echo "WARNING: tokenizer.json changed: the token-id tests (tests/tokenizer/token_bytes_test.cc,"
  echo "         tests/server/request_decoding_test.cc) and prompts written as ids need checking"
fi

for f in config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json; do
  cp "$NEW/$f" "$MODEL/$f"
done
cp "$GPU_OUT/eval_samples.jsonl" "$FIX/transformers_greedy_3shot.jsonl"
mkdir -p "$RESULTS"
for f in run.log report.json chat_outputs.jsonl chat_heldout_outputs.jsonl tool_outputs.jsonl; do
  if [ -s "$GPU_OUT/$f" ]; then cp "$GPU_OUT/$f" "$RESULTS/$f"; fi
done
echo "installed the model into $MODEL and the run's outputs into $RESULTS;"
echo "tests/fixtures/demo/transformers_greedy_3shot.jsonl refreshed"

# The numbers the docs quote, from the run's report.
python3 - "$GPU_OUT/report.json" "$MODEL" <<'EOF'
import json, os, sys
r = json.load(open(sys.argv[1]))
size = os.path.getsize(os.path.join(sys.argv[2], "model.safetensors"))
e, c, h, t, m, tl = (r.get(k, {}) for k in ("eval", "chat", "chat_heldout", "chat_test", "mtp", "tools"))
tr = r.get("train", {})
print("\n== numbers for docs/demo_model.md, models/demo-deepseek-v3/README.md and docs/benchmarks.md")
print(f"parameters {r.get('parameters')} + MTP layer {r.get('mtp_parameters')}; model.safetensors {size} bytes, "
      f"{r.get('save', {}).get('tensors')} tensors")
print(f"training: {tr.get('steps')} steps in {tr.get('seconds')} s, {tr.get('tokens')} token positions; "
      f"validation {json.dumps(tr.get('final_val'))}")
print(f"3-shot (transformers, 500 held-out): flexible-extract {e.get('flexible_extract')} "
      f"± {e.get('flexible_extract_stderr')}, strict-match {e.get('strict_match')}")
print(f"chat fixture: {c.get('chat_correct')} / {c.get('chat_problems')} problem conversations")
print(f"held-out chat questions (single turns): {h.get('correct')} / {h.get('n')}; per family {json.dumps(h.get('per_family'))}")
print(f"test problems as single chat turns: {t.get('correct')} / {t.get('n')}")
a3, ac = m.get("acceptance_3shot", {}), m.get("acceptance_chat_heldout", {})
print(f"MTP: expected greedy acceptance of one draft token {a3.get('accept_rate')} over {a3.get('positions')} "
      f"positions of the 3-shot replies, {ac.get('accept_rate')} over {ac.get('positions')} of the chat replies")
print(f"tool calls {tl.get('tool_calls_correct')} / {tl.get('tool_calls')}, answers after a tool result "
      f"{tl.get('tool_answers_correct')} / {tl.get('tool_answers')}")
print(f"run: torch {r.get('torch')}, transformers {r.get('transformers')}, {r.get('device')}, "
      f"train.py {r.get('total_seconds')} s")
EOF

cat <<EOF

== next, by hand (tools/demo_model/REFRESH.md has the full list)
1. Build and run the tests that use the demo model (build-cpu):
     cmake --build build-cpu -j2 && ctest --test-dir build-cpu -R 'DemoModel|Routes|ServeE2e|StructuredOutputs|GenerateCommand|openai_node_client|server.curl|demo.steps' --output-on-failure
     ctest --test-dir build-cpu -L slow -R DemoHeldOutParallel --output-on-failure    # about 5 min on 2 cores
2. Chat accuracy through Fission on the CPU (the numbers in docs/demo_model.md, "Chat-style questions"):
     build-cpu/fission serve --device cpu --port 30000 &
     python3 tools/demo_model/chat_accuracy.py --base-url http://127.0.0.1:30000 tests/fixtures/demo/test.jsonl
     python3 tools/demo_model/chat_accuracy.py --base-url http://127.0.0.1:30000 tests/fixtures/demo/chat_heldout.jsonl
     build-cpu/fission eval --data-dir tests/fixtures/demo ...   # 3-shot, as docs/demo_model.md measures it
3. Speculative decoding on the demo model's own NextN layer:
     build-cpu/fission serve --device cpu --port 30001 --speculative-algorithm NEXTN --speculative-num-steps 1 \\
       --speculative-eagle-topk 1 --speculative-num-draft-tokens 2 &
     (send a few chat requests, then read avg_spec_accept_length from /get_server_info)
4. scripts/demo.sh must still print the showcase answer (#### 29).
5. Update the numbers in models/demo-deepseek-v3/README.md, docs/demo_model.md and docs/benchmarks.md
   (printed above), then:
     git add models/demo-deepseek-v3 tests/fixtures/demo/transformers_greedy_3shot.jsonl tools/demo_model/results
EOF
