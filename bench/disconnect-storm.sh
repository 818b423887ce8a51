#!/usr/bin/env bash
# The disconnect storm at full size: tests/net/disconnect_storm_test.cpp
# (ctest runs it with 500 requests) with 10,000 streaming requests cut at
# random points, and the same checks afterwards (nothing left, RSS within
# its margin). Writes the test's summary line and outcome to OUT.txt.
#
# Usage: bench/disconnect-storm.sh TEST_NET OUT.txt [REQUESTS]
set -euo pipefail
test_net=$(realpath "$1"); out=$2; requests=${3:-10000}
start=$(date +%s)
status=0
PENSIEVE_STORM_REQUESTS=$requests "$test_net" '[storm]' >"$out.log" 2>&1 || status=$?
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
  grep -h "disconnect storm:" "$out.log" || true
  tail -n 2 "$out.log"
  echo "wall: $(( $(date +%s) - start )) s, exit status $status"
} >"$out"
[[ $status -eq 0 ]] && rm -f "$out.log"
cat "$out"
exit "$status"
