// Scattered swap-in transfers, pinned host -> device: 64 spans of one size
// at scattered offsets per iteration, as
//   BM_CudaSwapGather/mode:0  one cudaMemcpyAsync per span (DMA)
//   BM_CudaSwapGather/mode:1  one gather kernel launch for all 64
// (gpu/kernels/cuda/gather_launch.hpp). tests/gpu/device-checks.sh reads the
// crossover into the device table (kernels/swap_copy_plan.hpp's thresholds).
// Compiled only with CUDA; each skips without a device.
#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/kernels/cuda/gather_launch.hpp"

#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace {

namespace kcu = pensieve::kernels::cuda;

void BM_CudaSwapGather(benchmark::State& state) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const bool kernel = state.range(0) == 1;
  const std::size_t bytes = std::size_t(state.range(1)) << 10;
  constexpr int kSpans = 64;
  const std::size_t stride = 2 * bytes;  // every other slot: nothing adjacent to merge
  void *host = nullptr, *device = nullptr, *table = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  if (cudaHostAlloc(&host, stride * kSpans, cudaHostAllocPortable) != cudaSuccess ||
      cudaHostAlloc(&table, kSpans * sizeof(kcu::GatherCopy), cudaHostAllocPortable) != cudaSuccess ||
      cudaMalloc(&device, stride * kSpans) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&end) != cudaSuccess) {
    state.SkipWithError("cuda setup failed");
    return;
  }
  auto* copies = static_cast<kcu::GatherCopy*>(table);
  for (int i = 0; i < kSpans; ++i) {
    // Destinations in another order than the sources (chunks land in free device slots).
    const std::size_t dst = std::size_t((i * 37) % kSpans) * stride;
    copies[i] = {static_cast<char*>(host) + std::size_t(i) * stride, static_cast<char*>(device) + dst, bytes};
  }
  bool failed = false;
  for (auto _ : state) {
    (void)cudaEventRecord(start, stream);
    cudaError_t e = cudaSuccess;
    if (kernel) {
      e = kcu::launch_gather_copies(copies, kSpans, stream);
    } else {
      for (int i = 0; i < kSpans && e == cudaSuccess; ++i)
        e = cudaMemcpyAsync(copies[i].dst, copies[i].src, bytes, cudaMemcpyHostToDevice, stream);
    }
    (void)cudaEventRecord(end, stream);
    float ms = 0;
    if (e != cudaSuccess || cudaEventSynchronize(end) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start, end) != cudaSuccess) {
      state.SkipWithError("copy failed");
      failed = true;
      break;
    }
    state.SetIterationTime(double(ms) / 1e3);
  }
  if (!failed) {
    state.counters["GBps"] = benchmark::Counter(double(bytes) * kSpans * double(state.iterations()) / 1e9,
                                                benchmark::Counter::kIsRate);
  }
  (void)cudaFreeHost(host);
  (void)cudaFreeHost(table);
  (void)cudaFree(device);
  (void)cudaStreamDestroy(stream);
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(end);
}
BENCHMARK(BM_CudaSwapGather)
    ->ArgNames({"mode", "KiB"})
    ->ArgsProduct({{0, 1}, {16, 64, 128, 512, 2048}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
#endif
