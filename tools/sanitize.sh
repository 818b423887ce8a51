#!/usr/bin/env bash
# Builds the runtime, actors and net suites under a sanitizer and runs them,
# then runs the suites that have raced before (seeded sampling, cancel,
# disconnect, shutdown, and the whole runtime suite) again, ROUNDS times in
# all. A sanitizer report fails the test that made it, so this fails too.
#   usage: tools/sanitize.sh [asan|asan-ci|tsan] [ROUNDS]     (asan and 3 by default)
#   PENSIEVE_SANITIZE_SUITES="runtime actors" narrows the suites (the only
#   ones asan-ci, CI's preset, defines).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-asan}
rounds=${2:-3}
# asan-ci defines the runtime and actors suites only (CMakePresets.json).
default_suites="runtime actors net"
[[ $preset == asan-ci ]] && default_suites="runtime actors"
read -r -a suites <<<"${PENSIEVE_SANITIZE_SUITES:-$default_suites}"
tools/setup.sh "$preset"
targets=()
for s in "${suites[@]}"; do targets+=("test_$s"); done
start=$SECONDS
cmake --build --preset "$preset" --target "${targets[@]}"
echo "sanitize: built ${targets[*]} ($preset) in $((SECONDS - start)) s"
bin=build/$preset/tests
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
# What each suite runs again: the tests that have raced (Catch2 specs; a
# comma is "or").
declare -A racy=([runtime]="" [actors]="[sampling],[cancel]" [net]="[disconnect],[shutdown]")
run() {  # suite, spec...: runs it, the output kept only when it fails
  local suite=$1 log
  shift
  log=$(mktemp)
  local t0=$SECONDS
  if ! "$bin/test_$suite" "$@" >"$log" 2>&1; then
    tail -n 80 "$log"
    echo "sanitize: test_$suite $* FAILED under $preset (output above)" >&2
    rm -f "$log"
    return 1
  fi
  echo "sanitize: test_$suite $* passed ($(grep -Eo '[0-9]+ test cases?' "$log" | head -1 || true), $((SECONDS - t0)) s)"
  rm -f "$log"
}
start=$SECONDS
# [gpu] tests need a device; [soak] ones take minutes (run by hand).
for s in "${suites[@]}"; do run "$s" '~[gpu]~[soak]'; done
for ((r = 2; r <= rounds; r++)); do
  for s in "${suites[@]}"; do
    if [[ -n ${racy[$s]} ]]; then run "$s" "${racy[$s]}"; else run "$s" '~[gpu]'; fi
  done
done
echo "sanitize: $preset, ${suites[*]}, $rounds rounds of the racy tests: passed in $((SECONDS - start)) s"
