#!/usr/bin/env bash
# The demo model's 3-shot accuracy on its held-out problems under each storage format: the KV cache
# in fp8, every online quantization format, MXFP4 experts and the GLM-5.2 recipe's plan, next to the
# unquantized model. Each row starts `fission serve` (CPU unless DEVICE says otherwise) with the
# row's flags, runs `fission eval` against it and stops it; the table goes to stdout as Markdown.
#
#   usage: bash tools/demo_model/format_accuracy.sh FISSION [LIMIT] [ROW...]
#   FISSION  the fission binary; LIMIT  problems (default 500, all of tests/fixtures/demo/test.jsonl)
#   ROW      names from the list below (default all); PORT (default 30611), CONCURRENT (default 2),
#            DEVICE (default cpu) and LOGS (a folder for each row's server and eval logs) from the
#            environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { sed -n '2,11p' "$0"; exit 2; }
BIN=$1
LIMIT=${2:-500}
shift $(( $# >= 2 ? 2 : 1 ))
PORT=${PORT:-30611}
CONCURRENT=${CONCURRENT:-2}
DEVICE=${DEVICE:-cpu}
LOGS=${LOGS:-$(mktemp -d)}
mkdir -p "$LOGS"
EXCLUDE='"exclude_layer":["lm_head","model.embed_tokens","*.mlp.gate"]'
online() { printf -- '--model-loader-extra-config={"online_quant_config":{%s}}' "$1"; }

declare -A FLAGS=(
  [unquantized]=""
  [fp8-kv]="--kv-cache-dtype fp8_e4m3"
  [mxfp4-experts]="$(online '"layer_quant_config":{"model.layers.*.mlp.experts":"mxfp4"}')"
  [ptpc_fp8]="$(online "\"global_quant_config\":\"ptpc_fp8\",$EXCLUDE")"
  [per_block128_fp8]="$(online "\"global_quant_config\":\"per_block128_fp8\",$EXCLUDE")"
  [quantization-fp8]="--quantization fp8"
  [mxfp8]="$(online "\"global_quant_config\":\"mxfp8\",$EXCLUDE")"
  [mxfp4]="$(online "\"global_quant_config\":\"mxfp4\",$EXCLUDE")"
  [glm-5.2-recipe]="$(online "\"global_quant_config\":\"ptpc_fp8\",\"layer_quant_config\":{\"model.layers.*.mlp.experts\":\"mxfp8\"},$EXCLUDE")"
)
ORDER=(unquantized fp8-kv mxfp4-experts ptpc_fp8 per_block128_fp8 quantization-fp8 mxfp8 mxfp4 glm-5.2-recipe)
[ $# -gt 0 ] && ORDER=("$@")

echo "| row | serve flags | flexible-extract | strict-match | eval time |"
echo "|---|---|---:|---:|---:|"
for row in "${ORDER[@]}"; do
  [[ -v FLAGS[$row] ]] || { echo "format_accuracy: unknown row '$row' (rows: ${!FLAGS[*]})" >&2; exit 2; }
  # shellcheck disable=SC2086  # the row's flags are words; the JSON has no spaces
  "$BIN" serve --device "$DEVICE" --port "$PORT" --served-model-name demo ${FLAGS[$row]} \
      > "$LOGS/$row.serve.log" 2>&1 &
  server=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    kill -0 $server 2>/dev/null || { echo "format_accuracy: the server of '$row' exited:" >&2;
                                     tail -5 "$LOGS/$row.serve.log" >&2; exit 1; }
    sleep 0.5
  done
  start=$(date +%s)
  "$BIN" eval --base-url "http://127.0.0.1:$PORT" --model demo --data-dir tests/fixtures/demo --num-fewshot 3 \
      --limit "$LIMIT" --num-concurrent "$CONCURRENT" --disable-tqdm > "$LOGS/$row.eval.log" 2>&1 || true
  seconds=$(( $(date +%s) - start ))
  kill $server; wait $server 2>/dev/null || true
  # lm-eval's table rows: |gsm8k|3|flexible-extract|3|exact_match|↑|0.9960|±|0.0028|
  score() { grep -F "$1" "$LOGS/$row.eval.log" | grep -F exact_match | head -1 | awk -F'|' '{print $8}' | tr -d ' '; }
  echo "| $row | \`${FLAGS[$row]:-none}\` | $(score flexible-extract) | $(score strict-match) | $seconds s |"
done
