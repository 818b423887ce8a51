#pragma once
// Runs the attention kernels' work items on the forward pass's ThreadPool.
// Items are handed out through an atomic counter rather than in the pool's
// static ranges, so a few long items (a long prefill, an unsplit long decode
// row) do not leave the other threads idle. Which thread runs an item never
// changes its result. Used from the pool's owner thread only.
#include "gpu/kernels/cpu/attention_work_runner.hpp"
#include "gpu/kernels/cpu/thread_pool.hpp"

#include <algorithm>
#include <atomic>

namespace pensieve::kernels::cpu {

class ThreadPoolRunner final : public WorkRunner {
 public:
  explicit ThreadPoolRunner(ThreadPool& pool) : pool_(pool) {}

  std::int32_t workers() const override { return static_cast<std::int32_t>(pool_.size()); }

  void parallel_for(std::int64_t n, const Body& body) override {
    if (n <= 0) return;
    std::atomic<std::int64_t> next{0};
    pool_.parallel_for(std::min<std::size_t>(pool_.size(), static_cast<std::size_t>(n)),
                       [&](std::size_t, std::size_t, std::size_t thread) {
                         for (std::int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
                           body(i, static_cast<std::int32_t>(thread));
                         }
                       });
  }

 private:
  ThreadPool& pool_;
};

}  // namespace pensieve::kernels::cpu
