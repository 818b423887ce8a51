#!/usr/bin/env bash
# Installs what Pensieve needs from Debian 12 packages (idempotent; apt-get as
# root) and configures a build. Usage: tools/setup.sh [PRESET] (default release).
# The CUDA toolkit is not installed here: when /usr/local/cuda/bin/nvcc exists
# the CUDA backend is compiled, otherwise the build is CPU-only.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}

packages=(
  build-essential cmake ninja-build pkg-config git python3
  libboost1.81-dev libboost-json1.81-dev
  liburing-dev capnproto libcapnp-dev
  catch2 libopenblas-dev libbenchmark-dev
  clang libclang-rt-14-dev
  chromium chromium-driver
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

cmake --preset "$preset" >/dev/null
echo "setup: configured build/$preset"
