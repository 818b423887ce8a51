#include "runtime/task_group.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/channel_error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/assert.hpp>
#include <boost/system/system_error.hpp>

namespace pensieve::rt {

namespace {

bool is_cancellation(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const boost::system::system_error& e) {
    return e.code() == asio::error::operation_aborted ||
           e.code() == asio::experimental::error::channel_cancelled;
  } catch (...) {
    return false;
  }
}

}  // namespace

TaskGroup::~TaskGroup() {
  std::lock_guard lock(mutex_);
  BOOST_ASSERT_MSG(children_.empty(), "a TaskGroup must be stopped before it is destroyed");
}

void TaskGroup::request_stop() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  for (auto& [id, child] : children_) {
    // Signals are not thread-safe: emit on the child's own executor.
    asio::post(child.executor,
               [signal = child.signal] { signal->emit(asio::cancellation_type::terminal); });
  }
}

asio::awaitable<void> TaskGroup::stop() {
  request_stop();
  co_await wait();
}

asio::awaitable<void> TaskGroup::wait() {
  const auto executor = co_await asio::this_coro::executor;
  std::shared_ptr<Waiter> waiter;
  {
    std::lock_guard lock(mutex_);
    if (!children_.empty()) {
      waiter = std::make_shared<Waiter>(executor, 1);
      waiters_.push_back(waiter);
    }
  }
  if (waiter) co_await waiter->async_receive(asio::as_tuple(asio::use_awaitable));
  rethrow_first_fault();
}

std::size_t TaskGroup::size() const {
  std::lock_guard lock(mutex_);
  return children_.size();
}

bool TaskGroup::stopping() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

void TaskGroup::on_child_done(std::uint64_t id, std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  auto it = children_.find(id);
  BOOST_ASSERT_MSG(it != children_.end(), "a child finished twice");
  // The finishing coroutine still references the slot inside the signal, so
  // the signal is released later, on the child's executor.
  asio::post(it->second.executor, [signal = std::move(it->second.signal)] {});
  children_.erase(it);
  if (error && !first_fault_ && !is_cancellation(error)) first_fault_ = error;
  if (children_.empty()) {
    for (auto& waiter : waiters_) (void)waiter->try_send(boost::system::error_code{});
    waiters_.clear();
  }
}

void TaskGroup::rethrow_first_fault() {
  std::exception_ptr fault;
  {
    std::lock_guard lock(mutex_);
    fault = std::exchange(first_fault_, nullptr);
  }
  if (fault) std::rethrow_exception(fault);
}

}  // namespace pensieve::rt
