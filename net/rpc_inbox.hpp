#pragma once
// RpcInbox: hands values from any thread to the Cap'n Proto event loop's
// thread. Producers (the engine's Asio executor) push; the loop thread awaits
// ready() and takes everything queued.
//
// The values travel under a std::mutex; a push that finds the loop waiting
// rings it through the RpcLoopWaker (an eventfd the loop watches), and the
// loop fulfils its own, same-thread promise. Nothing crosses threads through
// kj's cross-thread fulfillers, whose synchronisation ThreadSanitizer cannot
// see (libkj is not instrumented).
//
// push(): any thread. ready(), take(), close(): the loop thread only, one
// ready() outstanding at a time.
#include "net/rpc_loop_waker.hpp"

#include <kj/async.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace pensieve::net {

template <class T>
class RpcInbox {
 public:
  explicit RpcInbox(std::shared_ptr<RpcLoopWaker> waker) : waker_(std::move(waker)), core_(std::make_shared<Core>()) {}

  void push(T value) {
    bool ring = false;
    {
      std::lock_guard lock(core_->mutex);
      core_->items.push_back(std::move(value));
      ring = std::exchange(core_->waiting, false);
    }
    if (ring) waker_->post([core = core_] { core->wake(); });
  }

  // Resolves once something is queued (at once if something already is).
  kj::Promise<void> ready() {
    std::lock_guard lock(core_->mutex);
    if (!core_->items.empty()) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    core_->fulfiller = kj::mv(paf.fulfiller);
    core_->waiting = true;
    return kj::mv(paf.promise);
  }

  std::vector<T> take() {
    std::lock_guard lock(core_->mutex);
    return std::exchange(core_->items, {});
  }

  // The loop side is going away: forget its waiter.
  void close() {
    std::lock_guard lock(core_->mutex);
    core_->waiting = false;
    core_->fulfiller = nullptr;
  }

 private:
  struct Core {
    std::mutex mutex;
    std::vector<T> items;                          // guarded by mutex
    bool waiting = false;                          // guarded by mutex: a ready() awaits a ring
    kj::Own<kj::PromiseFulfiller<void>> fulfiller;  // the loop thread only

    void wake() {  // on the loop thread, from the waker
      kj::Own<kj::PromiseFulfiller<void>> f;
      {
        std::lock_guard lock(mutex);
        f = kj::mv(fulfiller);
      }
      if (f.get() != nullptr) f->fulfill();
    }
  };

  std::shared_ptr<RpcLoopWaker> waker_;
  std::shared_ptr<Core> core_;
};

}  // namespace pensieve::net
