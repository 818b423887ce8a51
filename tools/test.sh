#!/usr/bin/env bash
# Sets up, builds and runs every test. Usage: tools/test.sh [PRESET]
# (release by default; asan and tsan run the same suites under sanitizers).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
tools/setup.sh "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset"
