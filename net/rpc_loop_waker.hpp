#pragma once
// RpcLoopWaker: runs tasks posted from any thread on the Cap'n Proto event
// loop's thread. post() queues the task under a std::mutex and writes an
// eventfd; the loop watches the eventfd (through kj's own fd observer) and
// runs everything queued. Both steps are ones ThreadSanitizer follows (a
// mutex, and a write/read on one fd), unlike kj's cross-thread fulfillers,
// whose futex and atomics live in uninstrumented libkj.
//
// Shared (std::shared_ptr) by the loop and every producer. post(): any
// thread. run(): the loop thread, once; tasks posted after the loop ended
// are dropped unrun (with the waker).
#include <kj/async-io.h>

#include <functional>
#include <mutex>
#include <vector>

namespace pensieve::net {

class RpcLoopWaker {
 public:
  RpcLoopWaker();  // aborts when no eventfd can be made (out of fds at start-up)
  ~RpcLoopWaker();
  RpcLoopWaker(const RpcLoopWaker&) = delete;
  RpcLoopWaker& operator=(const RpcLoopWaker&) = delete;

  void post(std::function<void()> task);

  // Runs posted tasks as they come, until the returned promise is dropped.
  kj::Promise<void> run(kj::LowLevelAsyncIoProvider& io);
  // The loop thread, once run()'s promise is gone and before the loop is:
  // drops kj's view of the fd (it belongs to the loop).
  void detach() { input_ = nullptr; }

 private:
  kj::Promise<void> drain_forever(kj::AsyncInputStream& input);

  int fd_ = -1;
  std::mutex mutex_;
  std::vector<std::function<void()>> tasks_;  // guarded by mutex_
  kj::Own<kj::AsyncInputStream> input_;      // loop thread only
  std::uint64_t counter_ = 0;                // read buffer, loop thread only
};

}  // namespace pensieve::net
