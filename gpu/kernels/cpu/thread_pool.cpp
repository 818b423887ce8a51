#include "gpu/kernels/cpu/thread_pool.hpp"

#include "runtime/thread_name.hpp"
#include "runtime/thread_priority.hpp"

#include <algorithm>
#include <cassert>
#include <string>

namespace pensieve::kernels::cpu {

namespace {
// Spin this many polls before sleeping: decode launches a loop every few
// microseconds, and a futex wake costs more than that.
constexpr int spin_polls = 4000;

template <class Pred>
void spin_then_wait(const std::atomic<std::uint64_t>& word, std::uint64_t old, Pred done) {
  for (int i = 0; i < spin_polls; ++i) {
    if (done()) return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  while (!done()) word.wait(old, std::memory_order_acquire);
}
}  // namespace

std::size_t default_thread_count() {
  return std::max<std::size_t>(1, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(std::size_t n_threads, double min_parallel_cost)
    : n_threads_(std::max<std::size_t>(1, n_threads)),
      min_parallel_cost_(min_parallel_cost),
      scratch_(n_threads_) {
  workers_.reserve(n_threads_ - 1);
  for (std::size_t i = 1; i < n_threads_; ++i)
    workers_.emplace_back([this, i] {
      rt::name_this_thread("pv-compute-" + std::to_string(i));
      worker_loop(i);
    });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_share(std::size_t index) {
  if (index >= n_active_) return;
  const std::size_t groups = (n_items_ + grain_ - 1) / grain_;
  const std::size_t g0 = groups * index / n_active_;
  const std::size_t g1 = groups * (index + 1) / n_active_;
  const std::size_t begin = std::min(n_items_, g0 * grain_);
  const std::size_t end = std::min(n_items_, g1 * grain_);
  if (begin < end) (*body_)(begin, end, index);
}

void ThreadPool::worker_loop(std::size_t index) {
  std::uint64_t seen = 0;
  for (;;) {
    spin_then_wait(generation_, seen,
                   [&] { return generation_.load(std::memory_order_acquire) != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    rt::lower_this_thread_priority(owner_nice_);
    run_share(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // The owner may be asleep on generation_'s neighbour; pending_ is polled.
      pending_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(std::size_t n_items, const Body& body, std::size_t grain,
                              double cost) {
  if (cost < min_parallel_cost_) {
    if (n_items > 0) body(0, n_items, 0);
    return;
  }
  parallel_for(n_items, body, grain);
}

void ThreadPool::parallel_for(std::size_t n_items, const Body& body, std::size_t grain) {
  if (n_items == 0) return;
  grain = std::max<std::size_t>(1, grain);
  const std::size_t groups = (n_items + grain - 1) / grain;
  const std::size_t active = std::min(n_threads_, groups);
  if (active == 1) {
    body(0, n_items, 0);
    return;
  }
  body_ = &body;
  n_items_ = n_items;
  grain_ = grain;
  n_active_ = active;
  owner_nice_ = rt::this_thread_nice();
  pending_.store(n_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_share(0);
  for (int i = 0; i < spin_polls; ++i) {
    if (pending_.load(std::memory_order_acquire) == 0) break;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  for (std::size_t left; (left = pending_.load(std::memory_order_acquire)) != 0;) {
    pending_.wait(left, std::memory_order_acquire);
  }
  body_ = nullptr;
}

}  // namespace pensieve::kernels::cpu
