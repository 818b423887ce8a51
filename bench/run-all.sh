#!/usr/bin/env bash
# Builds and runs every component micro-benchmark (the one Google Benchmark
# program pensieve-microbench, made of bench/micro/*.cpp) and writes its JSON
# into bench/results/<UTC date>-microbench.json, with the machine's context.
# Usage: bench/run-all.sh [Google Benchmark flags, e.g. --benchmark_filter=Actor]
# BUILD_DIR=DIR uses an already configured build folder instead of the
# `release` preset (build/release, configured by tools/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${BUILD_DIR:-}" ]]; then
  tools/setup.sh release
  BUILD_DIR=build/release
fi
cmake --build "$BUILD_DIR" --target pensieve-microbench
mkdir -p bench/results
out="bench/results/$(date -u +%Y-%m-%d)-microbench.json"
"$BUILD_DIR/bench/pensieve-microbench" --benchmark_out="$out" --benchmark_out_format=json "$@"
echo "run-all: wrote $out"
