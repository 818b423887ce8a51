#!/usr/bin/env bash
# The official openai npm package against the real server (ctest "openai-node: ..." runs this).
# Usage: tests/openai-node/run.sh PENSIEVE_BINARY WORK_DIR
# Installs the pinned `openai` from package-lock.json into WORK_DIR (npm ci,
# only when the lock changed) and runs openai_client.mjs there. Exits 77
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
cp "$here/package.json" "$here/package-lock.json" "$here/openai_client.mjs" "$here/../js/pensieve_server.mjs" "$work/"
cd "$work"
if ! cmp -s package-lock.json node_modules/.installed-lock 2>/dev/null; then
  if npm ci --no-audit --no-fund --loglevel=error; then
    cp package-lock.json node_modules/.installed-lock
  fi
fi
if [[ ! -f node_modules/openai/package.json ]]; then
  echo "SKIPPED: node_modules/openai is absent: 'npm ci' could not install the openai package (offline?)"
  exit 77
fi
exec timeout --kill-after=10 240 node openai_client.mjs "$binary" "$work"
