// The CUDA backend's TierGather: runs passed by value (more than one
// launch's worth here: 200 runs, 128 a launch) scatter pinned host bytes to
// the device on a CUDA copy stream and gather them back, byte for byte, and
// an event recorded after the call follows every byte. [gpu]: run from
// tests/gpu/device-checks.sh; exits as SKIPPED (77) without a device.
#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/backend/cuda/cuda_tier_gather.hpp"
#include "runtime/cuda/cuda_stream.hpp"
#include "tests/gpu/cuda_test_support.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace pensieve;

TEST_CASE("the CUDA tier gather scatters 200 pinned host runs to the device and gathers them back", "[gpu][swap_copy]") {
  testing::require_cuda_device();
  const std::size_t total = std::size_t(4) << 20;
  void *host = nullptr, *back = nullptr, *device = nullptr;
  REQUIRE(cudaHostAlloc(&host, total, cudaHostAllocPortable) == cudaSuccess);
  REQUIRE(cudaHostAlloc(&back, total, cudaHostAllocPortable) == cudaSuccess);
  REQUIRE(cudaMalloc(&device, total) == cudaSuccess);
  REQUIRE(cudaMemset(device, 0, total) == cudaSuccess);
  std::mt19937_64 rng(26);
  auto* h = static_cast<std::byte*>(host);
  for (std::size_t i = 0; i < total; ++i) h[i] = std::byte(rng());
  std::memset(back, 0, total);
  // 200 runs of 4 KiB (+3 bytes on odd ones), every other 8 KiB, the device
  // side in reverse order.
  std::vector<backend::TierRun> runs;
  for (std::size_t i = 0; i < 200; ++i) {
    const std::size_t bytes = 4096 + (i % 2 ? 3 : 0);
    runs.push_back({static_cast<std::byte*>(device) + (199 - i) * 8192, h + i * 8192, bytes});
  }
  auto stream = rt::CudaStream::create(0, "copy.h2d");
  REQUIRE(stream.has_value());
  backend::cuda::CudaTierGather gather;
  gather.launch(**stream, backend::TierDirection::to_device, runs, "swap_in");
  for (auto& r : runs) r.host = static_cast<std::byte*>(back) + (r.host - h);
  gather.launch(**stream, backend::TierDirection::to_host, runs, "swap_out");
  (*stream)->record().wait_blocking();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < 200; ++i) {
    wrong += std::memcmp(static_cast<std::byte*>(back) + i * 8192, h + i * 8192, runs[i].bytes) != 0;
  }
  CHECK(wrong == 0);
  (void)cudaFreeHost(host);
  (void)cudaFreeHost(back);
  (void)cudaFree(device);
}
#endif  // PENSIEVE_HAVE_CUDA
