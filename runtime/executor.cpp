#include "runtime/executor.hpp"

namespace pensieve::rt {

LoopThread::LoopThread()
    : guard_(boost::asio::make_work_guard(context_)), thread_([this] { context_.run(); }) {}

LoopThread::~LoopThread() { join(); }

void LoopThread::join() {
  guard_.reset();
  if (thread_.joinable()) thread_.join();
}

}  // namespace pensieve::rt
