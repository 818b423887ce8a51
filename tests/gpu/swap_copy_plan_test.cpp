// Which swap transfers go as DMA (cudaMemcpyAsync) and which through the
// gather kernel (gpu/kernels/swap_copy_plan.hpp).
#include "gpu/kernels/swap_copy_plan.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace pensieve::kernels;

namespace {

constexpr std::size_t kKiB = 1024;

std::vector<CopySpan> spans_of(std::initializer_list<std::size_t> sizes) {
  std::vector<CopySpan> out;
  std::size_t at = 0;
  for (std::size_t bytes : sizes) {
    out.push_back({at, at * 3, bytes});  // scattered destinations
    at += bytes + 4096;
  }
  return out;
}

}  // namespace

TEST_CASE("large spans go as DMA, enough small spans together through the gather kernel", "[swap_copy]") {
  const auto spans = spans_of({2048 * kKiB, 100 * kKiB, 100 * kKiB, 512 * kKiB, 64 * kKiB, 100 * kKiB});
  const SwapCopyPlan plan = plan_swap_copies(spans, {.min_dma_bytes = 512 * kKiB, .min_gather_spans = 4});
  CHECK(plan.dma == std::vector<CopySpan>{spans[0], spans[3]});
  CHECK(plan.gather == std::vector<CopySpan>{spans[1], spans[2], spans[4], spans[5]});
}

TEST_CASE("too few small spans to pay for a launch all go as DMA, in order", "[swap_copy]") {
  const auto spans = spans_of({100 * kKiB, 2048 * kKiB, 100 * kKiB, 100 * kKiB});
  const SwapCopyPlan plan = plan_swap_copies(spans, {.min_dma_bytes = 512 * kKiB, .min_gather_spans = 4});
  CHECK(plan.dma == spans);
  CHECK(plan.gather.empty());
}

TEST_CASE("every byte is copied once: empty spans dropped, the default thresholds", "[swap_copy]") {
  auto spans = spans_of({0, 128 * kKiB, 128 * kKiB, 0, 128 * kKiB, 128 * kKiB, 4096 * kKiB});
  const SwapCopyPlan plan = plan_swap_copies(spans);
  std::size_t bytes = 0;
  for (const auto& s : plan.dma) bytes += s.bytes;
  for (const auto& s : plan.gather) bytes += s.bytes;
  CHECK(bytes == 4 * 128 * kKiB + 4096 * kKiB);
  CHECK(plan.dma.size() == 1);
  CHECK(plan.gather.size() == 4);
  CHECK(plan_swap_copies({}).dma.empty());
}

TEST_CASE("the rule over sizes alone gives the spans' indices, in order", "[swap_copy]") {
  const std::vector<std::size_t> sizes{100 * kKiB, 0, 2048 * kKiB, 100 * kKiB, 100 * kKiB, 100 * kKiB};
  const SwapCopyRoute route = route_swap_copies(sizes, {.min_dma_bytes = 512 * kKiB, .min_gather_spans = 4});
  CHECK(route.dma == std::vector<std::size_t>{2});
  CHECK(route.gather == std::vector<std::size_t>{0, 3, 4, 5});
  const SwapCopyRoute few = route_swap_copies(std::vector<std::size_t>{100 * kKiB, 0, 100 * kKiB});
  CHECK(few.dma == std::vector<std::size_t>{0, 2});
  CHECK(few.gather.empty());
}
