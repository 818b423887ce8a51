#pragma once
// RpcInbox: hands values from any thread to the Cap'n Proto event loop's
// thread. Producers (the engine's Asio executor) push; the loop thread awaits
// ready() and takes everything queued.
//
// The values travel under a std::mutex and the kj cross-thread fulfiller only
// rings the loop awake: kj's own futex-based synchronisation is invisible to
// ThreadSanitizer (libkj is not instrumented), std::mutex is not.
//
// Shared (std::shared_ptr) by both sides. push(): any thread. ready(),
// take(), close(): the loop thread only, one ready() outstanding at a time.
#include <kj/async.h>

#include <mutex>
#include <utility>
#include <vector>

namespace pensieve::net {

template <class T>
class RpcInbox {
 public:
  void push(T value) {
    std::lock_guard lock(mutex_);
    items_.push_back(std::move(value));
    if (waiter_) {
      waiter_->fulfill();
      waiter_ = nullptr;
    }
  }

  // Resolves once something is queued (at once if something already is).
  kj::Promise<void> ready() {
    std::lock_guard lock(mutex_);
    if (!items_.empty()) return kj::READY_NOW;
    auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
    waiter_ = kj::mv(paf.fulfiller);
    return kj::mv(paf.promise);
  }

  std::vector<T> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(items_, {});
  }

  // The loop side is going away: forget its waiter.
  void close() {
    std::lock_guard lock(mutex_);
    waiter_ = nullptr;
  }

 private:
  std::mutex mutex_;
  std::vector<T> items_;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> waiter_;
};

}  // namespace pensieve::net
