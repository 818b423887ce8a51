#!/usr/bin/env bash
# Prepares a prebuilt bundle for tests/gpu/device-checks.sh on a GPU machine
# whose image lacks the project's Debian packages (Boost, Cap'n Proto, Catch2,
# Google Benchmark, liburing, OpenBLAS): the CUDA build's test_gpu and
# pensieve-microbench, the shared libraries they need that are neither glibc
# nor CUDA's (the device has its own CUDA; NCCL comes from its Python
# packages), and the ../shared files the [gpu] tests read. Written under the
# build dir (git-ignored), so a device call can carry it:
#
#   tests/gpu/device-bundle.sh                      # here, after building build-cuda
#   run: carry ["build-cuda/device-bundle"], command "tests/gpu/device-checks.sh"
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build-cuda}"
bundle="$build/device-bundle"
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/compat" "$bundle/shared/models" "$bundle/shared/golden"
for prog in tests/test_gpu bench/pensieve-microbench bench/fe-latency bench/loopback-floor; do
  [ -x "$build/$prog" ] || { echo "missing $build/$prog: build it first"; exit 1; }
  cp "$build/$prog" "$bundle/bin/"
  strip --strip-debug "$bundle/bin/$(basename "$prog")" || true
done
# Every resolved dependency except the C library's and CUDA's; the compiler
# runtime goes to lib/compat, used only where the device's own is too old.
for prog in "$bundle"/bin/*; do
  ldd "$prog" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*) ;;
    libgcc_s.so*|libstdc++.so*) cp -L "$lib" "$bundle/lib/compat/" ;;
    libcuda*|libcudart*|libcublas*|libnccl*|libnvidia*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
shared="$root/../shared"
cp "$shared/models/stories260K.bin" "$bundle/shared/models/"
cp "$shared/golden/stories260K.golden.jsonl" "$bundle/shared/golden/"
# Where the binaries look for ../shared (PENSIEVE_SOURCE_DIR baked in at build time).
echo "$root" > "$bundle/source_dir"
du -sh "$bundle"
