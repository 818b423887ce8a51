#pragma once
// Holds an engine's scheduler thread (which runs the conversation actors
// too) inside one iteration, through EngineOptions::on_iteration: what the
// tests need to queue messages behind a busy control thread.
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>

namespace pensieve::testing {

// Holds the scheduler's thread inside one iteration, once armed: the test
// learns that it is held (entered) and lets it go (open). Opened on
// destruction too, so a failed check never leaves the engine's thread stuck.
class IterationGate {
 public:
  ~IterationGate() { open(); }
  void arm() { armed_ = true; }
  // On the scheduler's thread, after an iteration.
  void on_iteration() {
    if (!armed_.exchange(false)) return;
    entered_.set_value();
    released_.wait();
  }
  bool wait_entered(std::chrono::seconds bound) {
    return entered_future_.wait_for(bound) == std::future_status::ready;
  }
  void open() {
    std::call_once(opened_, [this] { release_.set_value(); });
  }

 private:
  std::atomic<bool> armed_{false};
  std::promise<void> entered_;
  std::future<void> entered_future_ = entered_.get_future();
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::once_flag opened_;
};

}  // namespace pensieve::testing
