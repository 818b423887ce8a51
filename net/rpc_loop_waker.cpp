#include "net/rpc_loop_waker.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sys/eventfd.h>
#include <unistd.h>
#include <utility>

namespace pensieve::net {

RpcLoopWaker::RpcLoopWaker() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) {
    std::perror("pensieve: eventfd");
    std::abort();  // a fault: the process is out of file descriptors before serving
  }
}

RpcLoopWaker::~RpcLoopWaker() {
  input_ = nullptr;
  ::close(fd_);
}

void RpcLoopWaker::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  const std::uint64_t one = 1;
  ssize_t n = 0;
  do {
    n = ::write(fd_, &one, sizeof one);
  } while (n < 0 && errno == EINTR);
  // EAGAIN: the counter is at its maximum, so the loop is awake anyway.
}

kj::Promise<void> RpcLoopWaker::run(kj::LowLevelAsyncIoProvider& io) {
  // The fd stays ours: kj only reads it.
  input_ = io.wrapInputFd(fd_, kj::LowLevelAsyncIoProvider::ALREADY_NONBLOCK);
  return drain_forever(*input_);
}

kj::Promise<void> RpcLoopWaker::drain_forever(kj::AsyncInputStream& input) {
  return input.tryRead(&counter_, sizeof counter_, sizeof counter_).then([this, &input](size_t) {
    std::vector<std::function<void()>> tasks;
    {
      std::lock_guard lock(mutex_);
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    return drain_forever(input);
  });
}

}  // namespace pensieve::net
