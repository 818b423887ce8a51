#pragma once
// A fixed set of worker threads that run one data-parallel loop at a time.
// Owns its threads; the thread that calls parallel_for takes part in the loop
// and is the only one allowed to call it (one owner, e.g. the forward pass).
// The split is static (item ranges per thread), so which thread computes an
// item never changes what the item computes: kernels keep each output
// element's reduction inside one call of the body.
// Workers follow the owner's CPU priority: a loop started by a thread with a
// higher nice value (rt::lower_this_thread_priority, --compute-nice) lowers
// each worker to it first, so the whole pass yields to token delivery.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace pensieve::kernels::cpu {

class ThreadPool {
 public:
  // body(begin, end, thread_index) processes items [begin, end).
  using Body = std::function<void(std::size_t, std::size_t, std::size_t)>;

  // n_threads >= 1, the caller included. Loops cheaper than
  // min_parallel_cost (see below) run on the calling thread; tests pass 0 to
  // force every loop through the workers.
  explicit ThreadPool(std::size_t n_threads, double min_parallel_cost = default_min_parallel_cost);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  std::size_t size() const { return n_threads_; }

  // Runs body over [0, n_items) split into at most size() contiguous ranges of
  // whole `grain`-sized groups; returns when every range is done.
  void parallel_for(std::size_t n_items, const Body& body, std::size_t grain = 1);

  // The same, but on the calling thread alone when the loop's total cost
  // (roughly multiply-adds) is too small to pay for waking the workers.
  void parallel_for(std::size_t n_items, const Body& body, std::size_t grain, double cost);

  // About 32K multiply-adds: a decode GEMV of 128 KiB of F32 weights takes
  // ~6 us on one core, several times a fork/join's ~1 us on an idle machine.
  static constexpr double default_min_parallel_cost = 1 << 15;

  // A buffer owned by the pool for thread `thread_index` (the body's third
  // argument), kept between loops so kernels need not allocate per call.
  // Only that thread may touch it while a loop runs.
  std::vector<float>& scratch(std::size_t thread_index) { return scratch_[thread_index]; }

 private:
  void worker_loop(std::size_t index);
  void run_share(std::size_t index);

  std::size_t n_threads_;
  double min_parallel_cost_;
  std::vector<std::thread> workers_;
  std::vector<std::vector<float>> scratch_;
  const Body* body_ = nullptr;
  std::size_t n_items_ = 0;
  std::size_t grain_ = 1;
  std::size_t n_active_ = 0;
  int owner_nice_ = 0;  // the owner's nice value for this loop; published by generation_
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::size_t> pending_{0};
  std::atomic<bool> stopping_{false};
};

// The default thread count: the hardware's, at least 1.
std::size_t default_thread_count();

}  // namespace pensieve::kernels::cpu
