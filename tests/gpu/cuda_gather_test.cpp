// The swap gather kernel copies scattered spans between pinned host memory
// and device memory byte for byte, aligned spans (16 bytes a thread) and
// unaligned ones (byte by byte) alike. [gpu]: run from tests/gpu/device-checks.sh.
#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/kernels/cuda/gather_launch.hpp"
#include "gpu/kernels/swap_copy_plan.hpp"
#include "tests/gpu/cuda_test_support.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace pensieve;
namespace kcu = pensieve::kernels::cuda;

TEST_CASE("the gather kernel copies scattered host spans to the device and back, byte for byte", "[gpu][swap_copy]") {
  testing::require_cuda_device();
  const std::size_t total = std::size_t(8) << 20;
  void *host = nullptr, *back = nullptr, *device = nullptr, *table = nullptr;
  REQUIRE(cudaHostAlloc(&host, total, cudaHostAllocPortable) == cudaSuccess);
  REQUIRE(cudaHostAlloc(&back, total, cudaHostAllocPortable) == cudaSuccess);
  REQUIRE(cudaHostAlloc(&table, 64 * sizeof(kcu::GatherCopy), cudaHostAllocPortable) == cudaSuccess);
  REQUIRE(cudaMalloc(&device, total) == cudaSuccess);
  REQUIRE(cudaMemset(device, 0, total) == cudaSuccess);
  std::mt19937_64 rng(8);
  auto* h = static_cast<unsigned char*>(host);
  for (std::size_t i = 0; i < total; ++i) h[i] = static_cast<unsigned char>(rng());
  // 40 spans of 1..96 KiB at scattered offsets (the odd ones unaligned),
  // destinations in reverse order.
  std::vector<kernels::CopySpan> spans;
  std::size_t src = 0, dst = total;
  for (int i = 0; i < 40; ++i) {
    const std::size_t bytes = (1 + rng() % 96) * 1024 + (i % 2 ? 7 : 0);
    dst -= bytes + 4096 + (i % 2 ? 3 : 0);
    spans.push_back({src + (i % 2 ? 5 : 0), dst, bytes});
    src += bytes + 8192;
  }
  REQUIRE(src < dst);
  auto* copies = static_cast<kcu::GatherCopy*>(table);
  for (std::size_t i = 0; i < spans.size(); ++i)
    copies[i] = {h + spans[i].src_offset, static_cast<unsigned char*>(device) + spans[i].dst_offset, spans[i].bytes};
  REQUIRE(kcu::launch_gather_copies(copies, std::int32_t(spans.size()), nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  // Back to the host through the kernel too (device -> pinned host), to offsets equal to the sources'.
  std::memset(back, 0, total);
  for (std::size_t i = 0; i < spans.size(); ++i)
    copies[i] = {static_cast<unsigned char*>(device) + spans[i].dst_offset, static_cast<unsigned char*>(back) + spans[i].src_offset,
                 spans[i].bytes};
  REQUIRE(kcu::launch_gather_copies(copies, std::int32_t(spans.size()), nullptr) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<unsigned char> on_device(total);
  REQUIRE(cudaMemcpy(on_device.data(), device, total, cudaMemcpyDeviceToHost) == cudaSuccess);
  std::size_t wrong = 0, outside = 0;
  std::vector<bool> written(total, false);
  for (const auto& s : spans) {
    wrong += std::memcmp(on_device.data() + s.dst_offset, h + s.src_offset, s.bytes) != 0;
    wrong += std::memcmp(static_cast<unsigned char*>(back) + s.src_offset, h + s.src_offset, s.bytes) != 0;
    for (std::size_t i = 0; i < s.bytes; ++i) written[s.dst_offset + i] = true;
  }
  for (std::size_t i = 0; i < total; ++i) outside += !written[i] && on_device[i] != 0;
  CHECK(wrong == 0);
  CHECK(outside == 0);  // nothing past a span was touched
  (void)cudaFreeHost(host);
  (void)cudaFreeHost(back);
  (void)cudaFreeHost(table);
  (void)cudaFree(device);
}
#endif  // PENSIEVE_HAVE_CUDA
