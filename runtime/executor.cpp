#include "runtime/executor.hpp"

#include "runtime/thread_name.hpp"

#include <string>

namespace pensieve::rt {

LoopThread::LoopThread(std::string_view name)
    : guard_(boost::asio::make_work_guard(context_)),
      thread_([this, name = std::string(name)] {
        name_this_thread(name);
        context_.run();
      }) {}

LoopThread::~LoopThread() { join(); }

void LoopThread::join() {
  guard_.reset();
  if (thread_.joinable()) thread_.join();
}

}  // namespace pensieve::rt
