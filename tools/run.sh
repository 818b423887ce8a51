#!/usr/bin/env bash
# Sets up, builds and runs the server. Without --model it serves the built-in
# generated test model (random weights). Extra arguments go to `pensieve`
# (see `pensieve --help`). Usage: tools/run.sh [pensieve options]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh release
cmake --build --preset release --target pensieve
exec build/release/tools/pensieve "$@"
