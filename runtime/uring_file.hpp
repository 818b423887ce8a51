#pragma once
// UringFile: a file read and written through an IoRing by coroutines.
// read_at / write_at loop over short transfers until the whole buffer moved
// (or, for reads, end of file); every failure is an Error naming the file,
// the operation and the errno text.
//
// O_DIRECT: with DirectIo::prefer the file is opened with O_DIRECT where the
// filesystem allows it (direct() says whether it took; direct_note() says
// why not). A direct file also keeps a buffered descriptor: the aligned body
// of a transfer (4 KiB-aligned offset and address, whole 4 KiB blocks) goes
// through O_DIRECT, an unaligned tail or an unaligned request through the
// page cache, so any size works and AlignedBuffers take the fast path.
//
// Ownership: owns its descriptors; shares the ring. Use from coroutines on
// any executor; the buffer must stay alive until the awaited call returns.
#include "runtime/aligned_buffer.hpp"
#include "runtime/error.hpp"
#include "runtime/io_ring.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace pensieve::rt {

enum class DirectIo { prefer, never };

struct FileOptions {
  bool writable = false;
  bool create = false;    // with writable
  bool truncate = false;  // with writable
  DirectIo direct = DirectIo::prefer;
  unsigned mode = 0644;
};

class UringFile {
 public:
  static constexpr std::size_t direct_alignment_bytes = 4096;

  static Result<UringFile> open(std::shared_ptr<IoRing> ring, const std::string& path,
                                FileOptions options, Tracer* tracer = nullptr);
  // Takes ownership of an open descriptor (buffered I/O only).
  static UringFile adopt(std::shared_ptr<IoRing> ring, int fd, const std::string& name,
                         Tracer* tracer = nullptr);

  UringFile(UringFile&& other) noexcept;
  UringFile& operator=(UringFile&& other) noexcept;
  UringFile(const UringFile&) = delete;
  UringFile& operator=(const UringFile&) = delete;
  ~UringFile();

  bool direct() const noexcept { return direct_fd_ >= 0; }
  const std::string& direct_note() const noexcept { return direct_note_; }
  const std::string& path() const noexcept { return path_; }

  // Reads into `buffer` from `offset_bytes`; returns the bytes read, fewer
  // than buffer.size() only at end of file.
  boost::asio::awaitable<Result<std::size_t>> read_at(std::uint64_t offset_bytes,
                                                      std::span<std::byte> buffer);
  // Writes all of `data` at `offset_bytes`.
  boost::asio::awaitable<Result<void>> write_at(std::uint64_t offset_bytes,
                                                std::span<const std::byte> data);
  // Makes the file's data and metadata durable.
  boost::asio::awaitable<Result<void>> fsync();

 private:
  UringFile(std::shared_ptr<IoRing> ring, int fd, int direct_fd, std::string path,
            std::string direct_note, Tracer* tracer);
  // The descriptor and length for the next piece of a transfer.
  std::pair<int, std::uint32_t> route(std::uint64_t offset_bytes, const void* address,
                                      std::size_t remaining_bytes) const;
  Error io_error(const char* op, std::uint64_t offset_bytes, int result) const;
  void close_all() noexcept;

  std::shared_ptr<IoRing> ring_;
  int fd_ = -1;         // buffered
  int direct_fd_ = -1;  // O_DIRECT, or -1
  std::string path_;
  std::string direct_note_;
  Tracer* tracer_ = nullptr;
  std::string_view trace_name_;  // path_, interned in tracer_
};

}  // namespace pensieve::rt
