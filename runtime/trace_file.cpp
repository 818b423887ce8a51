// The trace file: a sequence of Cap'n Proto TraceChunk messages (unpacked
// stream framing), each holding up to `spans_per_chunk` spans, so a large
// trace never needs one huge message and a reader can stop at any chunk.
#include "runtime/trace.hpp"
#include "schemas/trace.capnp.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

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

void write_chunk(int fd, const Span* spans, std::size_t count) {
  capnp::MallocMessageBuilder message;
  auto list = message.initRoot<schema::TraceChunk>().initSpans(static_cast<unsigned>(count));
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

Result<void> read_chunk(kj::BufferedInputStream& in, std::vector<Span>& out) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = std::uint64_t{1} << 32;
  capnp::InputStreamMessageReader reader(in, options);
  for (const auto s : reader.getRoot<schema::TraceChunk>().getSpans()) {
    auto kind = from_schema(s.getKind());
    if (!kind) return kind.error();
    out.push_back(Span{*kind, std::string(s.getActor().cStr(), s.getActor().size()),
                       std::string(s.getName().cStr(), s.getName().size()), s.getId(),
                       s.getStartNs(), s.getEndNs(), s.getThread()});
  }
  return {};
}

}  // namespace

Result<std::size_t> Tracer::flush_to(const std::string& path) {
  const std::vector<Span> spans = drain();
  FdCloser file{::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (file.fd < 0) {
    return fail("trace: cannot create " + path + ": " + std::strerror(errno));
  }
  try {
    for (std::size_t first = 0; first < spans.size(); first += spans_per_chunk) {
      write_chunk(file.fd, spans.data() + first, std::min(spans_per_chunk, spans.size() - first));
    }
  } catch (const kj::Exception& e) {
    return fail("trace: writing " + path + " failed: " + e.getDescription().cStr());
  }
  const int fd = file.fd;
  file.fd = -1;
  if (::close(fd) != 0) {
    return fail("trace: closing " + path + " failed: " + std::strerror(errno));
  }
  return spans.size();
}

Result<std::vector<Span>> read_trace(const std::string& path) {
  FdCloser file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    return fail("trace: cannot open " + path + ": " + std::strerror(errno));
  }
  std::vector<Span> spans;
  try {
    kj::FdInputStream raw(file.fd);
    kj::BufferedInputStreamWrapper in(raw);
    while (in.tryGetReadBuffer().size() > 0) {
      auto chunk = read_chunk(in, spans);
      if (!chunk) return chunk.error();
    }
  } catch (const kj::Exception& e) {
    return fail("trace: " + path + " is not a valid trace file: " + e.getDescription().cStr());
  }
  return spans;
}

}  // namespace pensieve::rt
