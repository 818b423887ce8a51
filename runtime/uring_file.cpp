#include "runtime/uring_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace pensieve::rt {
namespace {

// One request moves at most this much; the loops issue the rest.
constexpr std::uint32_t max_piece_bytes = std::uint32_t{1} << 30;

bool aligned(std::uint64_t value, std::size_t unit) { return value % unit == 0; }

}  // namespace

Result<UringFile> UringFile::open(std::shared_ptr<IoRing> ring, const std::string& path,
                                  FileOptions options, Tracer* tracer) {
  int flags = O_CLOEXEC | (options.writable ? O_RDWR : O_RDONLY);
  if (options.writable && options.create) flags |= O_CREAT;
  if (options.writable && options.truncate) flags |= O_TRUNC;
  const int fd = ::open(path.c_str(), flags, options.mode);
  if (fd < 0) return fail("open " + path + " failed: " + std::strerror(errno));
  int direct_fd = -1;
  std::string note = "buffered (O_DIRECT not requested)";
  if (options.direct == DirectIo::prefer) {
    direct_fd = ::open(path.c_str(), (flags & ~(O_CREAT | O_TRUNC)) | O_DIRECT);
    note = direct_fd >= 0 ? "O_DIRECT"
                          : std::string("buffered (O_DIRECT refused: ") + std::strerror(errno) + ")";
  }
  return UringFile(std::move(ring), fd, direct_fd, path, std::move(note), tracer);
}

UringFile UringFile::adopt(std::shared_ptr<IoRing> ring, int fd, const std::string& name,
                           Tracer* tracer) {
  return UringFile(std::move(ring), fd, -1, name, "buffered (adopted descriptor)", tracer);
}

UringFile::UringFile(std::shared_ptr<IoRing> ring, int fd, int direct_fd, std::string path,
                     std::string direct_note, Tracer* tracer)
    : ring_(std::move(ring)),
      fd_(fd),
      direct_fd_(direct_fd),
      path_(std::move(path)),
      direct_note_(std::move(direct_note)),
      tracer_(tracer) {
  trace_name_ = tracer_ != nullptr ? tracer_->intern(path_) : std::string_view();
}

UringFile::UringFile(UringFile&& other) noexcept
    : ring_(std::move(other.ring_)),
      fd_(std::exchange(other.fd_, -1)),
      direct_fd_(std::exchange(other.direct_fd_, -1)),
      path_(std::move(other.path_)),
      direct_note_(std::move(other.direct_note_)),
      tracer_(other.tracer_),
      trace_name_(other.trace_name_) {}

UringFile& UringFile::operator=(UringFile&& other) noexcept {
  if (this != &other) {
    close_all();
    ring_ = std::move(other.ring_);
    fd_ = std::exchange(other.fd_, -1);
    direct_fd_ = std::exchange(other.direct_fd_, -1);
    path_ = std::move(other.path_);
    direct_note_ = std::move(other.direct_note_);
    tracer_ = other.tracer_;
    trace_name_ = other.trace_name_;
  }
  return *this;
}

UringFile::~UringFile() { close_all(); }

void UringFile::close_all() noexcept {
  // close() errors carry nothing to act on here: durability is fsync()'s job.
  if (fd_ >= 0) ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
  fd_ = -1;
  direct_fd_ = -1;
}

std::pair<int, std::uint32_t> UringFile::route(std::uint64_t offset_bytes, const void* address,
                                               std::size_t remaining_bytes) const {
  constexpr std::size_t unit = direct_alignment_bytes;
  if (direct_fd_ >= 0 && remaining_bytes >= unit && aligned(offset_bytes, unit) &&
      aligned(reinterpret_cast<std::uintptr_t>(address), unit)) {
    const std::size_t body = remaining_bytes / unit * unit;
    return {direct_fd_, static_cast<std::uint32_t>(std::min<std::size_t>(body, max_piece_bytes))};
  }
  return {fd_, static_cast<std::uint32_t>(std::min<std::size_t>(remaining_bytes, max_piece_bytes))};
}

Error UringFile::io_error(const char* op, std::uint64_t offset_bytes, int result) const {
  return fail(std::string(op) + " " + path_ + " at offset " + std::to_string(offset_bytes) +
              " failed: " + std::strerror(-result));
}

boost::asio::awaitable<Result<std::size_t>> UringFile::read_at(std::uint64_t offset_bytes,
                                                               std::span<std::byte> buffer) {
  TraceSpan span(tracer_, SpanKind::file_io, trace_name_, "read", offset_bytes);
  std::size_t done = 0;
  while (done < buffer.size()) {
    std::byte* at = buffer.data() + done;
    const auto [fd, length] = route(offset_bytes + done, at, buffer.size() - done);
    const int result = co_await ring_->submit(
        IoRequest{IoRequest::Opcode::read, fd, at, length, offset_bytes + done});
    if (result == -EINTR) continue;
    if (result < 0) co_return io_error("read", offset_bytes + done, result);
    if (result == 0) break;  // end of file
    done += static_cast<std::size_t>(result);
  }
  co_return done;
}

boost::asio::awaitable<Result<void>> UringFile::write_at(std::uint64_t offset_bytes,
                                                         std::span<const std::byte> data) {
  TraceSpan span(tracer_, SpanKind::file_io, trace_name_, "write", offset_bytes);
  std::size_t done = 0;
  while (done < data.size()) {
    // io_uring takes a non-const pointer for both directions; a write only reads it.
    auto* at = const_cast<std::byte*>(data.data() + done);
    const auto [fd, length] = route(offset_bytes + done, at, data.size() - done);
    const int result = co_await ring_->submit(
        IoRequest{IoRequest::Opcode::write, fd, at, length, offset_bytes + done});
    if (result == -EINTR) continue;
    if (result < 0) co_return io_error("write", offset_bytes + done, result);
    if (result == 0) co_return io_error("write", offset_bytes + done, -EIO);
    done += static_cast<std::size_t>(result);
  }
  co_return Result<void>{};
}

boost::asio::awaitable<Result<void>> UringFile::fsync() {
  TraceSpan span(tracer_, SpanKind::file_io, trace_name_, "fsync");
  for (;;) {
    const int result = co_await ring_->submit(IoRequest{IoRequest::Opcode::fsync, fd_});
    if (result == -EINTR) continue;
    if (result < 0) co_return io_error("fsync", 0, result);
    co_return Result<void>{};
  }
}

}  // namespace pensieve::rt
