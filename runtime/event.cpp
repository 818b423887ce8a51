#include "runtime/event.hpp"

namespace pensieve::rt::detail {

void EventState::complete() {
  std::vector<HostFn> continuations;
  {
    std::lock_guard lock(mutex_);
    complete_.store(true, std::memory_order_release);
    continuations.swap(continuations_);
    done_.notify_all();
  }
  for (HostFn& fn : continuations) fn();
}

void EventState::on_complete(HostFn fn) {
  {
    std::lock_guard lock(mutex_);
    if (!complete_.load(std::memory_order_relaxed)) {
      continuations_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void EventState::wait_blocking() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return complete_.load(std::memory_order_relaxed); });
}

}  // namespace pensieve::rt::detail
