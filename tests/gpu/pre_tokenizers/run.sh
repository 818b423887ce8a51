#!/usr/bin/env bash
# The pre-tokenizer oracle (ctest "pre-tokenizers: ..." runs this).
# Usage: tests/gpu/pre_tokenizers/run.sh PENSIEVE_MODEL_BINARY WORK_DIR
# Needs only node (no npm package); exits 77 (skipped) where node is missing.
set -euo pipefail
binary=$(realpath "$1")
mkdir -p "$2"
work=$(realpath "$2")
command -v node >/dev/null || { echo "SKIPPED: node is not installed (the pre-tokenizer oracle runs JavaScript's regex engine)"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
exec timeout --kill-after=10 240 node "$here/oracle.mjs" "$binary" "$work"
