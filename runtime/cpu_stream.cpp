// A CpuStream has at most one drain() in flight: `scheduled_` is set when a
// drain is posted and cleared only by a drain that found the queue empty, so
// items never run concurrently or out of order. A drain runs a bounded batch
// and re-posts itself so one busy stream cannot starve the others.
#include "runtime/cpu_stream.hpp"

#include "runtime/thread_name.hpp"

#include <boost/asio/post.hpp>

#include <cstring>
#include <latch>
#include <memory>

namespace pensieve::rt {
namespace {
constexpr int items_per_drain = 64;
}

CpuStreamPool::CpuStreamPool(std::size_t worker_threads) : workers_(worker_threads) {
  // One naming task per worker: each waits at the latch until all have
  // started, so no worker takes two. Shared: a worker may still be leaving
  // arrive_and_wait when the constructor returns.
  auto started = std::make_shared<std::latch>(std::ptrdiff_t(worker_threads) + 1);
  for (std::size_t i = 0; i < worker_threads; ++i)
    boost::asio::post(workers_, [started] {
      name_this_thread("pv-stream");
      started->arrive_and_wait();
    });
  started->arrive_and_wait();
}

CpuStream::CpuStream(CpuStreamPool& pool, std::string_view name, Tracer* tracer)
    : executor_(pool.executor()), tracer_(tracer), name_(name) {
  name_view_ = tracer_ != nullptr ? tracer_->intern(name_) : std::string_view(name_);
}

CpuStream::~CpuStream() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return !scheduled_; });
}

void CpuStream::enqueue(HostFn fn, std::string_view op) {
  push(Item{Item::Kind::work, std::move(fn), nullptr, op});
}

void CpuStream::copy(void* dst, const void* src, std::size_t bytes, std::string_view op) {
  enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); }, op);
}

Event CpuStream::record() {
  auto state = std::make_shared<detail::EventState>();
  push(Item{Item::Kind::signal, {}, state, "record"});
  return Event(std::move(state));
}

void CpuStream::wait(const Event& event) {
  if (event.is_complete()) return;
  auto state = std::make_shared<detail::EventState>();
  // Park on a private state that the awaited event completes, so the item
  // does not need the Event's backend (a CUDA event works too).
  event.on_complete([state] { state->complete(); });
  push(Item{Item::Kind::wait, {}, std::move(state), "wait_event"});
}

void CpuStream::push(Item item) {
  bool post = false;
  {
    std::lock_guard lock(mutex_);
    item.id = next_id_++;
    queue_.push_back(std::move(item));
    post = !scheduled_;
    scheduled_ = true;
  }
  if (post) schedule();
}

void CpuStream::schedule() {
  boost::asio::post(executor_, [this] { drain(); });
}

void CpuStream::record_wait_span() {
  if (tracer_ != nullptr) {
    tracer_->record(SpanRecord{SpanKind::stream, name_view_, "wait_event", 0, parked_since_ns_,
                               steady_now_ns()});
  }
  parked_since_ns_ = 0;
}

void CpuStream::drain() {
  if (parked_since_ns_ != 0) record_wait_span();
  for (int done = 0; done < items_per_drain; ++done) {
    Item item;
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) {
        scheduled_ = false;
        idle_.notify_all();  // under the lock: the destructor may run right after
        return;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!run(item)) return;  // parked: the event's completion re-posts drain()
  }
  schedule();
}

bool CpuStream::run(Item& item) {
  switch (item.kind) {
    case Item::Kind::work: {
      TraceSpan span(tracer_, SpanKind::stream, name_view_, item.op, item.id);
      item.fn();
      return true;
    }
    case Item::Kind::signal:
      item.event->complete();
      return true;
    case Item::Kind::wait:
      // Every queued wait leaves one span: zero-length when it did not park.
      parked_since_ns_ = steady_now_ns();
      if (item.event->is_complete()) {
        record_wait_span();
        return true;
      }
      item.event->on_complete([this] { schedule(); });
      return false;
  }
  return true;
}

}  // namespace pensieve::rt
