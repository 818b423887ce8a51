// The trace file: a sequence of Cap'n Proto TraceChunk messages (unpacked
// stream framing), each holding up to `spans_per_chunk` spans, so a large
// trace never needs one huge message and a reader can stop at any chunk. The
// first chunk of every append carries the TraceHeader as it was then; the
// reader keeps the last one (files from before the header have none: it reads
// back as all zero).
#include "runtime/trace.hpp"
#include "runtime/trace_writer.hpp"
#include "schemas/trace.capnp.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

namespace pensieve::rt {
namespace {

constexpr std::size_t spans_per_chunk = 16384;

schema::SpanKind to_schema(SpanKind kind) { return static_cast<schema::SpanKind>(kind); }

Result<SpanKind> from_schema(schema::SpanKind kind) {
  const auto raw = static_cast<std::uint16_t>(kind);
  if (raw > static_cast<std::uint16_t>(SpanKind::custom)) {
    return fail("trace file: unknown span kind " + std::to_string(raw));
  }
  return static_cast<SpanKind>(raw);
}

kj::StringPtr text_of(const std::string& s) { return kj::StringPtr(s.c_str(), s.size()); }

void write_header(schema::TraceHeader::Builder out, const TraceHeader& header) {
  out.setClockSteadyNs(header.clock_steady_ns);
  out.setClockWallNs(header.clock_wall_ns);
  out.setStartSteadyNs(header.start_steady_ns);
  out.setDroppedSpans(header.dropped_spans);
  auto names = out.initThreadNames(static_cast<unsigned>(header.thread_names.size()));
  for (std::size_t i = 0; i < header.thread_names.size(); ++i) {
    names.set(static_cast<unsigned>(i), text_of(header.thread_names[i]));
  }
}

void write_chunk(int fd, const Span* spans, std::size_t count, const TraceHeader* header) {
  capnp::MallocMessageBuilder message;
  auto chunk = message.initRoot<schema::TraceChunk>();
  if (header != nullptr) write_header(chunk.initHeader(), *header);
  auto list = chunk.initSpans(static_cast<unsigned>(count));
  for (std::size_t i = 0; i < count; ++i) {
    const Span& s = spans[i];
    auto out = list[static_cast<unsigned>(i)];
    out.setKind(to_schema(s.kind));
    out.setActor(text_of(s.actor));
    out.setName(text_of(s.name));
    out.setId(s.id);
    out.setStartNs(s.start_ns);
    out.setEndNs(s.end_ns);
    out.setThread(s.thread);
    out.setFlowId(s.flow_id);
    if (!s.detail.empty()) out.setDetail(text_of(s.detail));
    out.setEnqueueNs(s.enqueue_ns);
  }
  capnp::writeMessageToFd(fd, message);
}

// Closes the descriptor on every path out of the function.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

std::string string_of(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

TraceHeader read_header(schema::TraceHeader::Reader in) {
  TraceHeader header;
  header.clock_steady_ns = in.getClockSteadyNs();
  header.clock_wall_ns = in.getClockWallNs();
  header.start_steady_ns = in.getStartSteadyNs();
  header.dropped_spans = in.getDroppedSpans();
  for (const auto name : in.getThreadNames()) header.thread_names.push_back(string_of(name));
  return header;
}

// `limit_words`: no chunk is larger than its file, so a corrupt segment table
// cannot make the reader allocate more than the file holds.
Result<void> read_chunk(kj::BufferedInputStream& in, TraceFile& out, std::uint64_t limit_words) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = limit_words;
  capnp::InputStreamMessageReader reader(in, options);
  const auto chunk = reader.getRoot<schema::TraceChunk>();
  if (chunk.hasHeader()) out.header = read_header(chunk.getHeader());
  for (const auto s : chunk.getSpans()) {
    auto kind = from_schema(s.getKind());
    if (!kind) return kind.error();
    out.spans.push_back(Span{*kind, string_of(s.getActor()), string_of(s.getName()), s.getId(),
                             s.getStartNs(), s.getEndNs(), s.getThread(), s.getFlowId(),
                             string_of(s.getDetail()), s.getEnqueueNs()});
  }
  return {};
}

}  // namespace

Result<TraceFileWriter> TraceFileWriter::create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("trace: cannot create " + path + ": " + std::strerror(errno));
  return TraceFileWriter(fd, path);
}

TraceFileWriter::TraceFileWriter(TraceFileWriter&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), spans_written_(other.spans_written_) {}

TraceFileWriter::~TraceFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Result<void> TraceFileWriter::append(std::span<const Span> spans, const TraceHeader& header) {
  if (fd_ < 0) return fail("trace: " + path_ + " is closed");
  try {
    // The first chunk always exists: it carries the header, spans or none.
    std::size_t first = 0;
    do {
      const std::size_t count = std::min(spans_per_chunk, spans.size() - first);
      write_chunk(fd_, spans.data() + first, count, first == 0 ? &header : nullptr);
      first += count;
    } while (first < spans.size());
  } catch (const kj::Exception& e) {
    return fail("trace: writing " + path_ + " failed: " + e.getDescription().cStr());
  }
  spans_written_ += spans.size();
  return {};
}

Result<void> TraceFileWriter::close() {
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0) return fail("trace: closing " + path_ + " failed: " + std::strerror(errno));
  return {};
}

Result<std::size_t> Tracer::flush_to(const std::string& path) {
  const std::vector<Span> spans = drain();
  auto writer = TraceFileWriter::create(path);
  if (!writer) return writer.error();
  if (auto r = writer->append(spans, header()); !r) return r.error();
  if (auto r = writer->close(); !r) return r.error();
  return spans.size();
}

Result<std::vector<Span>> read_trace(const std::string& path) {
  auto file = read_trace_file(path);
  if (!file) return file.error();
  return std::move(file->spans);
}

Result<TraceFile> read_trace_file(const std::string& path) {
  FdCloser file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    return fail("trace: cannot open " + path + ": " + std::strerror(errno));
  }
  TraceFile trace;
  try {
    struct stat info {};
    if (::fstat(file.fd, &info) != 0) {
      return fail("trace: cannot stat " + path + ": " + std::strerror(errno));
    }
    // The reader reads each word of a chunk about once, so twice the file's
    // size is ample; a corrupt segment table asking for more is refused
    // before anything is allocated. (A pipe has no size: 32 GiB then.)
    const std::uint64_t limit_words =
        S_ISREG(info.st_mode)
            ? 2 * (static_cast<std::uint64_t>(info.st_size) / sizeof(capnp::word)) + 64
            : std::uint64_t{1} << 32;
    kj::FdInputStream raw(file.fd);
    kj::BufferedInputStreamWrapper in(raw);
    while (in.tryGetReadBuffer().size() > 0) {
      auto chunk = read_chunk(in, trace, limit_words);
      if (!chunk) return chunk.error();
    }
  } catch (const kj::Exception& e) {
    return fail("trace: " + path + " is not a valid trace file: " + e.getDescription().cStr());
  }
  return trace;
}

}  // namespace pensieve::rt
