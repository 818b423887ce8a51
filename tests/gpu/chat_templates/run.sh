#!/usr/bin/env bash
# The chat-template oracle (ctest "chat templates: ..." runs this).
# Usage: tests/gpu/chat_templates/run.sh PENSIEVE_MODEL_BINARY WORK_DIR
# Installs the pinned @huggingface/jinja from package-lock.json into WORK_DIR
# (npm ci, only when the lock changed) and runs oracle.mjs there. Exits 77
# (skipped) only when node or npm is missing, or when the package could not
# be installed (no registry) and no earlier install is there.
set -euo pipefail
binary=$(realpath "$1")
mkdir -p "$2"
work=$(realpath "$2")
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool is not installed"; exit 77; }
done
here=$(cd "$(dirname "$0")" && pwd)
cp "$here/package.json" "$here/package-lock.json" "$here/oracle.mjs" "$work/"
cd "$work"
if ! cmp -s package-lock.json node_modules/.installed-lock 2>/dev/null; then
  if npm ci --no-audit --no-fund --loglevel=error; then
    cp package-lock.json node_modules/.installed-lock
  fi
fi
if [[ ! -f node_modules/@huggingface/jinja/package.json ]]; then
  echo "SKIPPED: node_modules/@huggingface/jinja is absent: 'npm ci' could not install it (is the npm registry reachable?)"
  exit 77
fi
TZ=UTC exec timeout --kill-after=10 240 node oracle.mjs "$binary" "$here" "$work"
