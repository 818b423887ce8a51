#include "gpu/kv/disk_tier_file.hpp"

#include "gpu/kv/chunk_checksum.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <random>
#include <stdexcept>
#include <unistd.h>

namespace pensieve::kv {
namespace {

using rt::AlignedBuffer;

ChunkError chunk_error(ChunkFault fault, std::string message) { return ChunkError{fault, std::move(message)}; }

std::string slot_name(DiskSlot slot) { return "disk KV slot " + std::to_string(slot.value); }

// Makes `path` (fresh, or keeping what it holds) `bytes` long, reserved
// where the filesystem can. Plain syscalls: this runs once, at startup,
// before any coroutine uses the store. Returns the length it had before.
Result<std::uint64_t> make_file(const std::filesystem::path& path, std::uint64_t bytes, bool keep) {
  const int fd = ::open(path.c_str(), O_CREAT | (keep ? 0 : O_TRUNC) | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return fail("create " + path.string() + " failed: " + std::strerror(errno));
  struct stat st {};
  const std::uint64_t before = ::fstat(fd, &st) == 0 ? std::uint64_t(st.st_size) : 0;
  int rc = before > bytes ? ::ftruncate(fd, static_cast<off_t>(bytes)) : 0;
  if (rc == 0) rc = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
  std::string why;
  if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
    rc = ::ftruncate(fd, static_cast<off_t>(bytes));  // sparse: the filesystem cannot reserve
  }
  if (rc != 0) why = std::strerror(errno);
  ::close(fd);
  if (rc != 0) {
    return fail("reserve " + std::to_string(bytes) + " bytes for " + path.string() + " failed: " + why);
  }
  return before;
}

}  // namespace

DiskTierFileConfig disk_layout_of(const KvPoolConfig& pool) {
  DiskTierFileConfig c;
  c.n_layers = pool.n_layers;
  c.layer_bytes = 2 * std::size_t(pool.block_tokens) *
                  kv_values_bytes(pool.dtype, std::int64_t(pool.n_kv_heads) * pool.head_dim);
  return c;
}

std::vector<std::span<std::byte>> chunk_layers(const KvPool& pool, BlockId block) {
  const KvPoolConfig& c = pool.config();
  if (std::int64_t(block.value) >= c.num_blocks) throw std::out_of_range("chunk_layers: block out of range");
  std::vector<std::span<std::byte>> layers;
  layers.reserve(std::size_t(c.n_layers));
  for (std::int32_t l = 0; l < c.n_layers; ++l) {
    const PagedKvView view = pool.layer(l);
    const std::size_t block_bytes = view.block_bytes();
    layers.emplace_back(static_cast<std::byte*>(view.data) + block.value * block_bytes, block_bytes);
  }
  return layers;
}

Result<std::unique_ptr<DiskTierFile>> DiskTierFile::open(std::shared_ptr<rt::IoRing> ring,
                                                             DiskTierFileConfig config) {
  if (config.n_layers <= 0 || config.layer_bytes == 0) return fail("disk KV store: empty chunk layout");
  const std::uint64_t payload = std::uint64_t(config.n_layers) * config.layer_bytes;
  const std::uint64_t slot_bytes = AlignedBuffer::round_up(header_block_bytes + payload, header_block_bytes);
  const std::uint64_t slots = config.budget_bytes / slot_bytes;
  if (slots == 0) {
    return fail("--kv-disk-gb budget of " + std::to_string(config.budget_bytes) + " bytes holds no chunk of " +
                std::to_string(slot_bytes) + " bytes");
  }
  if (slots > UINT32_MAX) return fail("disk KV store: too many slots for a 32-bit slot id");
  std::error_code ec;
  std::filesystem::create_directories(config.dir, ec);
  if (ec) return fail("create --kv-disk-dir " + config.dir.string() + " failed: " + ec.message());
  // Before anything in the folder is touched: another server may be using it.
  auto lock = DirLock::acquire(config.dir, "--kv-disk-dir");
  if (!lock) return lock.error();
  std::filesystem::path path = config.dir / file_name;
  if (!config.persistent) {
    // Nothing of a previous run is wanted: start from an empty file.
    std::filesystem::remove(path, ec);
    if (ec) return fail("remove stale " + path.string() + " failed: " + ec.message());
  }
  auto before = make_file(path, slots * slot_bytes, config.persistent);
  if (!before) return before.error();
  auto file = rt::UringFile::open(std::move(ring), path.string(),
                                  {.writable = true, .create = false, .truncate = false, .direct = config.direct});
  if (!file) return file.error();
  const std::uint64_t run_id = std::random_device{}() | (std::uint64_t(std::random_device{}()) << 32);
  std::unique_ptr<DiskTierFile> store(new DiskTierFile(std::move(*lock), std::move(config), std::move(*file), std::move(path),
                                                       std::uint32_t(slots), slot_bytes, run_id));
  if (store->config_.persistent) store->scan(std::uint32_t(std::min<std::uint64_t>(*before / slot_bytes, slots)));
  return store;
}

DiskTierFile::DiskTierFile(DirLock lock, DiskTierFileConfig config, rt::UringFile file, std::filesystem::path path,
                               std::uint32_t slot_count, std::uint64_t slot_bytes, std::uint64_t run_id)
    : lock_(std::move(lock)),
      config_(std::move(config)),
      file_(std::move(file)),
      path_(std::move(path)),
      slot_count_(slot_count),
      slot_bytes_(slot_bytes),
      payload_bytes_(std::uint64_t(config_.n_layers) * config_.layer_bytes),
      run_id_(run_id),
      written_(slot_count) {}

DiskTierFile::~DiskTierFile() {
  if (config_.persistent) return;
  std::error_code ec;  // best effort: the next open() removes it anyway
  std::filesystem::remove(path_, ec);
}

// Reads the header block of each of the previous file's first `old_slots`
// slots (buffered: once, at start-up) and keeps the labelled chunks of
// this model and layout; each such slot reads back as its chunk.
void DiskTierFile::scan(std::uint32_t old_slots) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<std::byte> block(header_block_bytes);
  for (std::uint32_t s = 0; s < old_slots; ++s) {
    ++scan_report_.scanned;
    const ssize_t got = fd < 0 ? -1 : ::pread(fd, block.data(), block.size(), off_t(slot_offset_bytes(DiskSlot{s})));
    if (got != ssize_t(block.size())) {
      ++scan_report_.unreadable;
      continue;
    }
    auto found = scan_chunk_header(block, expectation(DiskSlot{s}), slot_name(DiskSlot{s}));
    if (!found) {
      const ChunkFault f = found.error().fault;
      ++(f == ChunkFault::empty ? scan_report_.empty
                                : f == ChunkFault::foreign ? scan_report_.foreign : scan_report_.corrupt);
      continue;
    }
    written_[s] = Stamp{found->header.run_id, found->header.generation};
    scanned_.push_back(std::move(*found));
    ++scan_report_.labelled;
  }
  if (fd >= 0) ::close(fd);
}

void DiskTierFile::release(DiskSlot slot) {
  if (slot.value < slot_count_) written_[slot.value] = Stamp{};
}

AlignedBuffer DiskTierFile::take_staging() {
  if (staging_.empty()) return AlignedBuffer(slot_bytes_, header_block_bytes);
  AlignedBuffer b = std::move(staging_.back());
  staging_.pop_back();
  return b;
}

void DiskTierFile::give_back(AlignedBuffer buffer) {
  if (staging_.size() < config_.cached_staging_buffers) staging_.push_back(std::move(buffer));
}

ChunkResult<void> DiskTierFile::check_request(DiskSlot slot, std::size_t n_layers, std::size_t each_bytes,
                                                bool reading) const {
  if (slot.value >= slot_count_) {
    return chunk_error(ChunkFault::invalid, slot_name(slot) + " is out of range (the store has " +
                                                std::to_string(slot_count_) + " slots)");
  }
  if (n_layers != std::size_t(config_.n_layers) || each_bytes != config_.layer_bytes) {
    return chunk_error(ChunkFault::invalid, slot_name(slot) + ": a chunk is " + std::to_string(config_.n_layers) +
                                                " layers of " + std::to_string(config_.layer_bytes) + " bytes");
  }
  if (reading && written_[slot.value].generation == 0) {
    return chunk_error(ChunkFault::invalid, slot_name(slot) + " holds no chunk written in this run or found at open");
  }
  return {};
}

boost::asio::awaitable<ChunkResult<void>> DiskTierFile::write(DiskSlot slot,
                                                                std::span<const std::span<const std::byte>> layers,
                                                                std::span<const std::int32_t> tokens,
                                                                const ChunkLabel* label) {
  const std::size_t each = layers.empty() ? 0 : layers.front().size();
  for (const auto& l : layers) {
    if (l.size() != each) co_return chunk_error(ChunkFault::invalid, slot_name(slot) + ": layers differ in size");
  }
  if (auto ok = check_request(slot, layers.size(), each, false); !ok) co_return ok.error();
  written_[slot.value] = Stamp{};  // unreadable until this write completes
  AlignedBuffer staging = take_staging();
  std::byte* payload = staging.data() + header_block_bytes;
  std::uint32_t crc = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    std::byte* at = payload + l * each;
    std::memcpy(at, layers[l].data(), each);
    crc = chunk_checksum(crc, at, each);  // over the copy while it is in cache
  }
  ChunkExpectation sealed = expectation(slot);
  sealed.run_id = run_id_;
  sealed.generation = next_generation_++;
  const ChunkLabel none;
  const ChunkLabel& l = label ? *label : none;
  const ChunkHeader h = seal_chunk_header(sealed, crc, tokens, l);
  write_chunk_header_block(std::span(staging.data(), header_block_bytes), h, tokens, l);
  auto written = co_await file_.write_at(slot_offset_bytes(slot), std::span<const std::byte>(staging.data(), slot_bytes_));
  give_back(std::move(staging));
  if (!written) co_return chunk_error(ChunkFault::io, written.error().message);
  written_[slot.value] = Stamp{run_id_, h.generation};
  co_return ChunkResult<void>{};
}

boost::asio::awaitable<ChunkResult<void>> DiskTierFile::write(DiskSlot slot, const KvPool& pool, BlockId block,
                                                                std::span<const std::int32_t> tokens,
                                                                const ChunkLabel* label) {
  const auto spans = chunk_layers(pool, block);
  const std::vector<std::span<const std::byte>> layers(spans.begin(), spans.end());
  co_return co_await write(slot, std::span(layers), tokens, label);
}

ChunkExpectation DiskTierFile::expectation(DiskSlot slot) const {
  return ChunkExpectation{slot.value,           std::uint32_t(config_.n_layers), config_.layer_bytes,
                          payload_bytes_,       written_[slot.value].run_id,     written_[slot.value].generation,
                          config_.identity};
}

boost::asio::awaitable<ChunkResult<void>> DiskTierFile::read(DiskSlot slot,
                                                               std::span<const std::span<std::byte>> layers,
                                                               std::span<const std::int32_t> tokens) {
  const std::size_t each = layers.empty() ? 0 : layers.front().size();
  for (const auto& l : layers) {
    if (l.size() != each) co_return chunk_error(ChunkFault::invalid, slot_name(slot) + ": layers differ in size");
  }
  if (auto ok = check_request(slot, layers.size(), each, true); !ok) co_return ok.error();
  AlignedBuffer staging = take_staging();
  auto got = co_await file_.read_at(slot_offset_bytes(slot), std::span<std::byte>(staging.data(), slot_bytes_));
  if (!got) {
    give_back(std::move(staging));
    co_return chunk_error(ChunkFault::io, got.error().message);
  }
  const auto checked = check_chunk_slot(std::span<const std::byte>(staging.data(), *got), expectation(slot), tokens,
                                        slot_name(slot) + " (" + path_.string() + ")");
  if (!checked) {
    give_back(std::move(staging));
    co_return checked.error();
  }
  const ChunkHeader& h = *checked;
  const std::byte* payload = staging.data() + header_block_bytes;
  std::uint32_t crc = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::byte* at = payload + l * each;
    crc = chunk_checksum(crc, at, each);
    std::memcpy(layers[l].data(), at, each);  // while it is in cache
  }
  give_back(std::move(staging));
  if (crc != h.payload_crc32) {
    co_return chunk_error(ChunkFault::corrupt, slot_name(slot) + " (" + path_.string() +
                                                   "): the payload checksum does not match (torn or corrupt)");
  }
  co_return ChunkResult<void>{};
}

boost::asio::awaitable<ChunkResult<void>> DiskTierFile::read(DiskSlot slot, KvPool& pool, BlockId block,
                                                               std::span<const std::int32_t> tokens) {
  const auto layers = chunk_layers(pool, block);
  co_return co_await read(slot, std::span(layers), tokens);
}

boost::asio::awaitable<ChunkResult<void>> DiskTierFile::write_packed(DiskSlot slot, std::span<const std::byte> chunk,
                                                                       std::span<const std::int32_t> tokens) {
  if (chunk.size() != payload_bytes_) {
    co_return chunk_error(ChunkFault::invalid, slot_name(slot) + ": a packed chunk is " +
                                                   std::to_string(payload_bytes_) + " bytes");
  }
  std::vector<std::span<const std::byte>> layers;
  for (std::size_t l = 0; l < std::size_t(config_.n_layers); ++l) {
    layers.push_back(chunk.subspan(l * config_.layer_bytes, config_.layer_bytes));
  }
  co_return co_await write(slot, std::span(layers), tokens);
}

boost::asio::awaitable<ChunkResult<void>> DiskTierFile::read_packed(DiskSlot slot, std::span<std::byte> chunk,
                                                                      std::span<const std::int32_t> tokens) {
  if (chunk.size() != payload_bytes_) {
    co_return chunk_error(ChunkFault::invalid, slot_name(slot) + ": a packed chunk is " +
                                                   std::to_string(payload_bytes_) + " bytes");
  }
  std::vector<std::span<std::byte>> layers;
  for (std::size_t l = 0; l < std::size_t(config_.n_layers); ++l) {
    layers.push_back(chunk.subspan(l * config_.layer_bytes, config_.layer_bytes));
  }
  co_return co_await read(slot, std::span(layers), tokens);
}

}  // namespace pensieve::kv
