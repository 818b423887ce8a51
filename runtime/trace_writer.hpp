#pragma once
// Appends spans to a trace file while a recording runs, so a recording can
// outlast the rings: each append is whole Cap'n Proto chunks (the format of
// Tracer::flush_to), the first of them carrying the header as it stands then.
// read_trace_file keeps the last header it meets, so the file's final header
// (thread names, dropped count) is the one written by the last append.
//
// Not thread-safe: one owner appends (TraceFlusher serialises its callers).
#include "runtime/error.hpp"
#include "runtime/trace.hpp"

#include <cstdint>
#include <span>
#include <string>

namespace pensieve::rt {

class TraceFileWriter {
 public:
  // Creates (or truncates) `path`.
  static Result<TraceFileWriter> create(const std::string& path);

  TraceFileWriter(TraceFileWriter&& other) noexcept;
  TraceFileWriter& operator=(TraceFileWriter&&) = delete;
  TraceFileWriter(const TraceFileWriter&) = delete;
  ~TraceFileWriter();  // closes without reporting: call close() to learn of errors

  // Writes `spans` (possibly none) with `header`.
  Result<void> append(std::span<const Span> spans, const TraceHeader& header);
  Result<void> close();

  const std::string& path() const noexcept { return path_; }
  std::uint64_t spans_written() const noexcept { return spans_written_; }

 private:
  TraceFileWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  int fd_;
  std::string path_;
  std::uint64_t spans_written_ = 0;
};

}  // namespace pensieve::rt
