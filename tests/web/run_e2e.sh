#!/usr/bin/env bash
# The web chat page in a real headless Chromium (ctest "web: ..." runs this).
# Usage: tests/web/run_e2e.sh PENSIEVE_BINARY WORK_DIR
# Installs playwright-core from package-lock.json into WORK_DIR (npm ci; no
# browser download: Debian's chromium is used) and runs chat_e2e.mjs there.
# Exits 77 (skipped) when node, npm or chromium is missing.
set -euo pipefail
binary=$(realpath "$1")
mkdir -p "$2"
work=$(realpath "$2")
chromium=${PENSIEVE_CHROMIUM:-/usr/bin/chromium}
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool is not installed"; exit 77; }
done
[[ -x $chromium ]] || { echo "SKIPPED: no chromium at $chromium (tools/setup.sh installs it)"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
cp "$here/package.json" "$here/package-lock.json" "$here/chat_e2e.mjs" "$here/../js/pensieve_server.mjs" "$work/"
cd "$work"
# npm ci only when the lock changed since the last install.
if ! cmp -s package-lock.json node_modules/.installed-lock 2>/dev/null; then
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.installed-lock
fi
exec timeout --kill-after=10 240 node chat_e2e.mjs "$binary" "$work" "$chromium"
