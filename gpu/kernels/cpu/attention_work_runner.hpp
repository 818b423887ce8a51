#pragma once
// How the CPU attention kernels spread independent work items over threads.
// The kernels' results never depend on which worker runs an item or on how
// many workers there are; the worker index only selects scratch memory.
#include <cstdint>
#include <functional>

namespace pensieve::kernels::cpu {

class WorkRunner {
 public:
  using Body = std::function<void(std::int64_t item, std::int32_t worker)>;
  virtual ~WorkRunner() = default;
  virtual std::int32_t workers() const = 0;
  // Runs body(i, worker) for every i in [0, n), worker in [0, workers()), and
  // returns when all have finished.
  virtual void parallel_for(std::int64_t n, const Body& body) = 0;
};

// Runs everything on the calling thread.
class SerialRunner final : public WorkRunner {
 public:
  std::int32_t workers() const override { return 1; }
  void parallel_for(std::int64_t n, const Body& body) override {
    for (std::int64_t i = 0; i < n; ++i) body(i, 0);
  }
};

}  // namespace pensieve::kernels::cpu
