#pragma once
// Records a Tracer into a file for as long as a process runs: a thread drains
// every ring each `interval` and appends what it found (TraceFileWriter), so
// a recording longer than a ring loses nothing unless one thread records more
// than a ring's worth of spans within one interval (those are counted in the
// file's header as dropped, never silently lost).
//
// Owns its flushing thread and the file. flush_now() may be called from any
// thread, stop() from one thread at a time; the Tracer must outlive the
// flusher.
#include "runtime/error.hpp"
#include "runtime/trace.hpp"
#include "runtime/trace_writer.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

namespace pensieve::rt {

class TraceFlusher {
 public:
  // Creates `path` and starts the flushing thread. Does not enable the
  // tracer: the caller decides when recording starts.
  static Result<std::unique_ptr<TraceFlusher>> start(Tracer& tracer, const std::string& path,
                                                     std::chrono::milliseconds interval);
  ~TraceFlusher();  // stop()s, ignoring errors: call stop() to learn of them
  TraceFlusher(const TraceFlusher&) = delete;
  TraceFlusher& operator=(const TraceFlusher&) = delete;

  // Drains and appends now; returns the spans written by this call.
  Result<std::size_t> flush_now();
  // Stops the thread, drains a last time and closes the file; returns every
  // span written, or the first error met (after which nothing more was
  // written). Idempotent.
  Result<std::uint64_t> stop();

  std::uint64_t spans_written() const;
  std::uint64_t flushes() const;

 private:
  TraceFlusher(Tracer& tracer, TraceFileWriter writer, std::chrono::milliseconds interval);
  void run(std::stop_token stop);
  Result<std::size_t> flush_locked();

  Tracer& tracer_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;  // guards everything below
  TraceFileWriter writer_;
  std::optional<Error> error_;  // the first failure: no more writes after it
  bool closed_ = false;
  std::uint64_t flushes_ = 0;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last: starts after everything it uses exists
};

}  // namespace pensieve::rt
