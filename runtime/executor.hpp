#pragma once
// LoopThread: one io_context and the one thread that runs it. Actors spawned on
// executor() run on that thread, one handler at a time; several LoopThreads
// give several threads, and actors on different ones message each other
// through their (thread-safe) mailboxes.
//
// Owns the io_context and the thread. Constructed and joined by its owner's
// thread; executor() may be used from any thread.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <optional>
#include <string_view>
#include <thread>

namespace pensieve::rt {

class LoopThread {
 public:
  // name: the thread's (rt::name_this_thread).
  explicit LoopThread(std::string_view name = "pv-loop");
  ~LoopThread();  // join()
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  boost::asio::io_context::executor_type executor() noexcept { return context_.get_executor(); }

  // Lets the loop end once it runs out of work, and waits for its thread.
  // Stop what runs on it (its TaskGroup) first. Idempotent.
  void join();

 private:
  boost::asio::io_context context_{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::thread thread_;
};

}  // namespace pensieve::rt
