#pragma once
// The CPU backend of Stream. A CpuStreamPool owns a few worker threads; each
// CpuStream is an ordered queue drained by at most one worker at a time, so
// the streams of one pool run concurrently and each runs in order. A
// Stream::wait on an event that has not completed parks the stream (no
// worker blocks) until the event completes, which re-schedules it.
//
// Ownership: the pool must outlive its streams; a stream's destructor waits
// for the work already enqueued on it (including the events it waits for).
#include "runtime/stream.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/thread_pool.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

namespace pensieve::rt {

class CpuStreamPool {
 public:
  // The workers are named pv-stream (rt::name_this_thread): on the CPU
  // backend the forward pass runs on them.
  explicit CpuStreamPool(std::size_t worker_threads = 2);
  ~CpuStreamPool() { workers_.join(); }
  CpuStreamPool(const CpuStreamPool&) = delete;
  CpuStreamPool& operator=(const CpuStreamPool&) = delete;

  boost::asio::thread_pool::executor_type executor() noexcept { return workers_.get_executor(); }

 private:
  boost::asio::thread_pool workers_;
};

class CpuStream final : public Stream {
 public:
  // `tracer` (optional) records one span per work item and one per wait
  // (from reaching the wait to its event completing; zero-length if it had).
  CpuStream(CpuStreamPool& pool, std::string_view name, Tracer* tracer = nullptr);
  ~CpuStream() override;
  CpuStream(const CpuStream&) = delete;
  CpuStream& operator=(const CpuStream&) = delete;

  StreamBackend backend() const noexcept override { return StreamBackend::cpu; }
  std::string_view name() const noexcept override { return name_view_; }
  void enqueue(HostFn fn, std::string_view op = "host_fn") override;
  void copy(void* dst, const void* src, std::size_t bytes, std::string_view op = "copy") override;
  Event record() override;
  void wait(const Event& event) override;

 private:
  struct Item {
    enum class Kind { work, signal, wait } kind;
    HostFn fn;                                  // work
    std::shared_ptr<detail::EventState> event;  // signal: complete it; wait: park on it
    std::string_view op;
    std::uint64_t id = 0;
  };

  void push(Item item);
  void schedule();  // posts drain() to the pool
  void drain();     // runs on a worker; the only place items execute
  bool run(Item& item);  // false: the stream parked on the item's event
  void record_wait_span();

  boost::asio::thread_pool::executor_type executor_;
  Tracer* tracer_;
  std::string name_;
  std::string_view name_view_;  // interned in tracer_ when there is one

  std::mutex mutex_;  // guards queue_, scheduled_, next_id_
  std::condition_variable idle_;
  std::deque<Item> queue_;
  bool scheduled_ = false;  // a drain is posted, running, or parked on an event
  std::uint64_t next_id_ = 1;
  std::int64_t parked_since_ns_ = 0;  // touched by drain() only
};

}  // namespace pensieve::rt
