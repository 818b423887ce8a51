#!/usr/bin/env bash
# Device checks for the paged attention kernels, for a machine with a GPU:
# builds Release with CUDA, runs the [gpu] tests (CUDA vs the CPU kernel and
# the F64 reference) and the attention benchmarks, and writes the results to
# $OUT (or bench/results/ when OUT is unset). Meant to finish in under 8 minutes.
#
#   OUT=/some/dir tests/gpu/device-checks.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-$root/bench/results}"
build="${BUILD_DIR:-$root/build-device}"
stamp="$(date -u +%Y-%m-%d)"
mkdir -p "$out"
log="$out/device-checks-$stamp.log"
exec > >(tee "$log") 2>&1

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv || true
nproc
git -C "$root" rev-parse HEAD 2>/dev/null || true

echo "== build (Release, CUDA)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPENSIEVE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}"
grep -q 'PENSIEVE_HAVE_CUDA=1' "$build/build.ninja" || { echo "CUDA backend not enabled"; exit 1; }
ninja -C "$build" test_gpu
status=0
# The benchmarks are one program for the whole tree: a break elsewhere must not stop the tests.
ninja -C "$build" pensieve-microbench || { echo "pensieve-microbench did not build"; status=1; }

echo "== [gpu] tests"
"$build/tests/test_gpu" "[gpu]" --durations yes || status=$?

echo "== CPU kernel tests on this machine"
"$build/tests/test_gpu" "[paged_attention],[decode_plan],[kv]" || status=$?

echo "== benchmarks"
bench="$build/bench/pensieve-microbench"
[ -x "$bench" ] || { echo "no benchmarks"; exit 1; }
"$bench" --benchmark_filter='Cuda(Decode|Prefill)Attention' \
  --benchmark_min_time=0.2 --benchmark_out="$out/$stamp-cuda-attention.json" \
  --benchmark_out_format=json --benchmark_context=command="$0" || status=$?
"$bench" --benchmark_filter='CpuAttention|CpuDecodePlan' --benchmark_min_time=0.2 \
  --benchmark_out="$out/$stamp-cpu-attention-device-host.json" --benchmark_out_format=json || status=$?

echo "== copy bandwidth (for the bandwidth fraction of decode attention)"
if command -v nvidia-smi >/dev/null; then
  "$bench" --benchmark_filter='CudaCopyBandwidth' \
    --benchmark_out="$out/$stamp-cuda-copy-bandwidth.json" --benchmark_out_format=json 2>/dev/null || true
fi
echo "== done: status $status, results in $out"
exit $status
