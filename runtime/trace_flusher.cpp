#include "runtime/trace_flusher.hpp"

#include <utility>

namespace pensieve::rt {

Result<std::unique_ptr<TraceFlusher>> TraceFlusher::start(Tracer& tracer, const std::string& path,
                                                          std::chrono::milliseconds interval) {
  if (interval.count() <= 0) return fail("trace: the flush interval must be positive");
  auto writer = TraceFileWriter::create(path);
  if (!writer) return writer.error();
  return std::unique_ptr<TraceFlusher>(new TraceFlusher(tracer, std::move(*writer), interval));
}

TraceFlusher::TraceFlusher(Tracer& tracer, TraceFileWriter writer, std::chrono::milliseconds interval)
    : tracer_(tracer), interval_(interval), writer_(std::move(writer)),
      thread_([this](std::stop_token stop) { run(std::move(stop)); }) {}

TraceFlusher::~TraceFlusher() { (void)stop(); }

void TraceFlusher::run(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  for (;;) {
    // Wakes at the interval, or at once when stop() asks (the condition
    // variable watches the stop token).
    wake_.wait_for(lock, stop, interval_, [] { return false; });
    if (stop.stop_requested()) return;  // stop() writes what is left
    (void)flush_locked();               // an error is kept in error_; stop() reports it
  }
}

Result<std::size_t> TraceFlusher::flush_locked() {
  if (error_) return *error_;
  if (closed_) return fail("trace: " + writer_.path() + " is closed");
  // Drain before reading the header, so its dropped count covers the spans
  // lost up to this drain.
  const std::vector<Span> spans = tracer_.drain();
  if (auto r = writer_.append(spans, tracer_.header()); !r) {
    error_ = r.error();
    return r.error();
  }
  ++flushes_;
  return spans.size();
}

Result<std::size_t> TraceFlusher::flush_now() {
  std::lock_guard lock(mutex_);
  return flush_locked();
}

Result<std::uint64_t> TraceFlusher::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  std::lock_guard lock(mutex_);
  if (!closed_) {
    if (!error_) (void)flush_locked();
    closed_ = true;
    if (auto r = writer_.close(); !r && !error_) error_ = r.error();
  }
  if (error_) return *error_;
  return writer_.spans_written();
}

std::uint64_t TraceFlusher::spans_written() const {
  std::lock_guard lock(mutex_);
  return writer_.spans_written();
}

std::uint64_t TraceFlusher::flushes() const {
  std::lock_guard lock(mutex_);
  return flushes_;
}

}  // namespace pensieve::rt
