// Pinned host <-> device copy bandwidth, the ceiling of the host KV tier's
// swaps (tests/gpu/device-checks.sh compares the engine's swap-in bandwidth
// with it; target 80%):
//   BM_CudaPinnedCopy/dir:0  host -> device (swap-in)
//   BM_CudaPinnedCopy/dir:1  device -> host (swap-out)
//   BM_CudaPinnedCopy/dir:2  both at once on two streams (the paper measured
//                            18-20% lost; the swap engine defers swap-out
//                            behind an iteration's swap-in for this)
// at transfer sizes of one 32-token chunk of one layer of an 8B model
// (128 KiB), the swap engine's largest gathered transfer (2 MiB) and a bulk
// copy (64 MiB). GBps counts the bytes of one direction (both: the sum).
// Compiled only with CUDA; each skips without a device.
#ifdef PENSIEVE_HAVE_CUDA
#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

namespace {

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void BM_CudaPinnedCopy(benchmark::State& state) {
  if (!have_device()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const auto dir = int(state.range(0));
  const std::size_t bytes = std::size_t(state.range(1)) << 10;
  // Up to 64 transfers per iteration (a layer's worth of chunk runs), at
  // most 256 MiB in all.
  const int transfers = int(std::clamp<std::size_t>((std::size_t(256) << 20) / bytes, 1, 64));
  const std::size_t total = bytes * std::size_t(transfers);
  void *host = nullptr, *device = nullptr, *host2 = nullptr, *device2 = nullptr;
  cudaStream_t in = nullptr, out = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr, out_done = nullptr;
  if (cudaHostAlloc(&host, total, cudaHostAllocPortable) != cudaSuccess ||
      cudaHostAlloc(&host2, total, cudaHostAllocPortable) != cudaSuccess ||
      cudaMalloc(&device, total) != cudaSuccess || cudaMalloc(&device2, total) != cudaSuccess ||
      cudaStreamCreateWithFlags(&in, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&out, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess ||
      cudaEventCreate(&out_done) != cudaSuccess) {
    state.SkipWithError("cuda setup failed");
    return;
  }
  bool failed = false;
  for (auto _ : state) {
    (void)cudaEventRecord(start, in);
    (void)cudaStreamWaitEvent(out, start, 0);
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < transfers && e == cudaSuccess; ++i) {
      const std::size_t off = std::size_t(i) * bytes;
      if (dir == 0 || dir == 2)
        e = cudaMemcpyAsync(static_cast<char*>(device) + off, static_cast<char*>(host) + off, bytes,
                            cudaMemcpyHostToDevice, in);
      if (e == cudaSuccess && (dir == 1 || dir == 2))
        e = cudaMemcpyAsync(static_cast<char*>(host2) + off, static_cast<char*>(device2) + off, bytes,
                            cudaMemcpyDeviceToHost, dir == 2 ? out : in);
    }
    (void)cudaEventRecord(out_done, out);
    (void)cudaStreamWaitEvent(in, out_done, 0);
    (void)cudaEventRecord(stop, in);
    float ms = 0;
    if (e != cudaSuccess || cudaEventSynchronize(stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      state.SkipWithError("copy failed");
      failed = true;
      break;
    }
    state.SetIterationTime(double(ms) / 1e3);
  }
  if (!failed) {
    const double moved = double(total) * (dir == 2 ? 2.0 : 1.0);
    state.counters["GBps"] =
        benchmark::Counter(moved * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  }
  (void)cudaFreeHost(host);
  (void)cudaFreeHost(host2);
  (void)cudaFree(device);
  (void)cudaFree(device2);
  (void)cudaStreamDestroy(in);
  (void)cudaStreamDestroy(out);
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  (void)cudaEventDestroy(out_done);
}
BENCHMARK(BM_CudaPinnedCopy)
    ->ArgNames({"dir", "KiB"})
    ->ArgsProduct({{0, 1, 2}, {128, 2048, 65536}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
#endif
