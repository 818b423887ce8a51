// The disk KV tier: chunks round-trip byte for byte, and a chunk that is
// flipped, torn, stale or for other tokens is reported as such (never
// returned as data), apart from I/O errors and the caller's own mistakes.
#include "gpu/kv/disk_tier_file.hpp"

#include "gpu/kv/chunk_checksum.hpp"

#include "../temp_dir.hpp"
#include "tests/gpu/io_ring_runner.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <unistd.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace asio = boost::asio;
using namespace pensieve;
using namespace pensieve::kv;
using pensieve::testing::run_with_ring;

namespace {

KvPoolConfig pool_config(std::int32_t blocks) {
  return KvPoolConfig{.num_blocks = blocks, .block_tokens = 4, .n_layers = 3, .n_kv_heads = 2, .head_dim = 40,
                      .dtype = KvDType::f16, .tier = Tier::host, .poison_freed = false};
}

void fill_random(KvPool& pool, unsigned seed) {
  std::mt19937 rng(seed);
  for (std::int32_t l = 0; l < pool.config().n_layers; ++l) {
    auto* p = static_cast<unsigned char*>(pool.layer(l).data);
    for (std::size_t i = 0; i < pool.layer_bytes(); ++i) p[i] = static_cast<unsigned char>(rng());
  }
}

bool same_block(const KvPool& a, BlockId ba, const KvPool& b, BlockId bb) {
  const auto la = chunk_layers(a, ba);
  const auto lb = chunk_layers(b, bb);
  for (std::size_t l = 0; l < la.size(); ++l) {
    if (std::memcmp(la[l].data(), lb[l].data(), la[l].size()) != 0) return false;
  }
  return true;
}

std::vector<std::int32_t> tokens_of(std::int32_t first) { return {first, first + 1, first + 2, first + 3}; }

std::unique_ptr<DiskTierFile> open_store(std::shared_ptr<rt::IoRing> ring, const std::filesystem::path& dir,
                                           std::uint32_t slots, rt::DirectIo direct = rt::DirectIo::prefer) {
  DiskTierFileConfig c = disk_layout_of(pool_config(1));
  c.dir = dir;
  c.direct = direct;
  const std::uint64_t slot_bytes =
      rt::AlignedBuffer::round_up(DiskTierFile::header_block_bytes + c.n_layers * c.layer_bytes, 4096);
  c.budget_bytes = slots * slot_bytes + slot_bytes / 2;  // a partial slot does not count
  auto store = DiskTierFile::open(std::move(ring), c);
  if (!store) FAIL("open: " << store.error().message);
  return std::move(*store);
}

// Overwrites `bytes` at `offset` of the store's file, behind its back.
void patch_file(const DiskTierFile& store, std::uint64_t offset, std::span<const std::byte> bytes) {
  const int fd = ::open(store.path().c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), off_t(offset)) == ssize_t(bytes.size()));
  ::close(fd);
}

std::vector<std::byte> file_bytes(const DiskTierFile& store, std::uint64_t offset, std::size_t n) {
  std::vector<std::byte> out(n);
  const int fd = ::open(store.path().c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pread(fd, out.data(), n, off_t(offset)) == ssize_t(n));
  ::close(fd);
  return out;
}

// Writes block 0 of a random pool to `slot` for tokens_of(first).
asio::awaitable<ChunkResult<void>> write_one(DiskTierFile& store, const KvPool& pool, DiskSlot slot,
                                             std::int32_t first) {
  const auto tokens = tokens_of(first);
  co_return co_await store.write(slot, pool, BlockId{0}, tokens);
}

asio::awaitable<ChunkResult<void>> read_one(DiskTierFile& store, KvPool& pool, DiskSlot slot, std::int32_t first) {
  const auto tokens = tokens_of(first);
  co_return co_await store.read(slot, pool, BlockId{0}, tokens);
}

ChunkFault fault_of(const ChunkResult<void>& r) { return r ? ChunkFault::invalid : r.error().fault; }

}  // namespace

TEST_CASE("chunks written to several slots read back byte for byte, buffered or direct", "[kv][disk]") {
  for (const auto direct : {rt::DirectIo::prefer, rt::DirectIo::never}) {
    pensieve::testing::TempDir dir("disk-chunks");
    run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
      auto store = open_store(ring, dir.path(), 5, direct);
      CHECK(store->slot_count() == 5);
      if (direct == rt::DirectIo::never) CHECK_FALSE(store->direct());
      KvPool source(pool_config(5));
      fill_random(source, 7);
      KvPool back(pool_config(5));
      // Block b goes to slot 4 - b and comes back into block (b + 2) % 5.
      std::vector<std::vector<std::int32_t>> tokens;
      for (std::int32_t b = 0; b < 5; ++b) tokens.push_back(tokens_of(100 * b));
      std::vector<ChunkResult<void>> results;
      for (std::uint32_t b = 0; b < 5; ++b) {
        auto r = co_await store->write(DiskSlot{4 - b}, source, BlockId{b}, tokens[b]);
        results.push_back(r);
      }
      for (const auto& r : results) CHECK(r.has_value());
      for (std::uint32_t b = 0; b < 5; ++b) {
        auto r = co_await store->read(DiskSlot{4 - b}, back, BlockId{(b + 2) % 5}, tokens[b]);
        if (!r) FAIL_CHECK(r.error().message);
        CHECK(same_block(source, BlockId{b}, back, BlockId{(b + 2) % 5}));
      }
    });
  }
}

TEST_CASE("a flipped byte in a chunk's payload or header is reported as corrupt", "[kv][disk]") {
  pensieve::testing::TempDir dir("disk-chunks");
  run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
    auto store = open_store(ring, dir.path(), 3);
    KvPool source(pool_config(1));
    fill_random(source, 11);
    KvPool back(pool_config(1));
    const ChunkResult<void> w1 = co_await write_one(*store, source, DiskSlot{1}, 5);
    const ChunkResult<void> w2 = co_await write_one(*store, source, DiskSlot{2}, 5);
    REQUIRE(w1.has_value());
    REQUIRE(w2.has_value());
    // Payload: one bit of one byte in the middle of the last layer.
    const std::uint64_t payload_at = store->slot_offset_bytes(DiskSlot{1}) + DiskTierFile::header_block_bytes;
    const std::uint64_t victim = payload_at + store->payload_bytes() - 77;
    auto byte = file_bytes(*store, victim, 1);
    byte[0] ^= std::byte{0x10};
    patch_file(*store, victim, byte);
    const ChunkResult<void> r1 = co_await read_one(*store, back, DiskSlot{1}, 5);
    REQUIRE_FALSE(r1.has_value());
    CHECK(r1.error().fault == ChunkFault::corrupt);
    CHECK(r1.error().unusable_chunk());
    // Header: the generation field.
    const std::uint64_t header_at = store->slot_offset_bytes(DiskSlot{2}) + offsetof(ChunkHeader, generation);
    auto h = file_bytes(*store, header_at, 1);
    h[0] ^= std::byte{0x01};
    patch_file(*store, header_at, h);
    const ChunkResult<void> r2 = co_await read_one(*store, back, DiskSlot{2}, 5);
    CHECK(fault_of(r2) == ChunkFault::corrupt);
    // Slot 0 was never written: the caller's mistake, not corruption.
    const ChunkResult<void> r0 = co_await read_one(*store, back, DiskSlot{0}, 5);
    CHECK(fault_of(r0) == ChunkFault::invalid);
  });
}

TEST_CASE("a chunk read back for other tokens is reported as wrong_tokens", "[kv][disk]") {
  pensieve::testing::TempDir dir("disk-chunks");
  run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
    auto store = open_store(ring, dir.path(), 2);
    KvPool source(pool_config(1));
    fill_random(source, 3);
    KvPool back(pool_config(1));
    const ChunkResult<void> w = co_await write_one(*store, source, DiskSlot{0}, 40);
    REQUIRE(w.has_value());
    const ChunkResult<void> other = co_await read_one(*store, back, DiskSlot{0}, 41);
    CHECK(fault_of(other) == ChunkFault::wrong_tokens);
    const std::vector<std::int32_t> fewer{40, 41, 42};
    const ChunkResult<void> shorter = co_await store->read(DiskSlot{0}, back, BlockId{0}, fewer);
    CHECK(fault_of(shorter) == ChunkFault::wrong_tokens);
    const ChunkResult<void> right = co_await read_one(*store, back, DiskSlot{0}, 40);
    CHECK(right.has_value());
    CHECK(same_block(source, BlockId{0}, back, BlockId{0}));
  });
}

TEST_CASE("a torn chunk (file cut short, or its tail never written) is reported as corrupt", "[kv][disk]") {
  pensieve::testing::TempDir dir("disk-chunks");
  run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
    auto store = open_store(ring, dir.path(), 3);
    KvPool source(pool_config(1));
    fill_random(source, 5);
    KvPool back(pool_config(1));
    const ChunkResult<void> w0 = co_await write_one(*store, source, DiskSlot{0}, 1);
    const ChunkResult<void> w2 = co_await write_one(*store, source, DiskSlot{2}, 1);
    REQUIRE(w0.has_value());
    REQUIRE(w2.has_value());
    // Slot 0: the second half of its payload reads as zeros (a write cut off).
    const std::uint64_t half = store->payload_bytes() / 2;
    const std::vector<std::byte> zeros(store->payload_bytes() - half);
    patch_file(*store, store->slot_offset_bytes(DiskSlot{0}) + DiskTierFile::header_block_bytes + half, zeros);
    const ChunkResult<void> r0 = co_await read_one(*store, back, DiskSlot{0}, 1);
    CHECK(fault_of(r0) == ChunkFault::corrupt);
    // Slot 2, the last: the file ends in the middle of its payload.
    const auto cut = store->slot_offset_bytes(DiskSlot{2}) + DiskTierFile::header_block_bytes + half;
    REQUIRE(::truncate(store->path().c_str(), off_t(cut)) == 0);
    const ChunkResult<void> r2 = co_await read_one(*store, back, DiskSlot{2}, 1);
    REQUIRE_FALSE(r2.has_value());
    CHECK(r2.error().fault == ChunkFault::corrupt);
    CHECK_THAT(r2.error().message, Catch::Contains("torn"));
  });
}

TEST_CASE("an earlier chunk left in a slot by a lost write is reported as stale", "[kv][disk]") {
  pensieve::testing::TempDir dir("disk-chunks");
  run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
    auto store = open_store(ring, dir.path(), 1);
    KvPool source(pool_config(1));
    fill_random(source, 9);
    KvPool back(pool_config(1));
    const ChunkResult<void> first = co_await write_one(*store, source, DiskSlot{0}, 8);
    REQUIRE(first.has_value());
    const auto old = file_bytes(*store, 0, store->slot_bytes());
    const ChunkResult<void> second = co_await write_one(*store, source, DiskSlot{0}, 8);
    REQUIRE(second.has_value());
    patch_file(*store, 0, old);  // as if the second write never reached the disk
    const ChunkResult<void> r = co_await read_one(*store, back, DiskSlot{0}, 8);
    CHECK(fault_of(r) == ChunkFault::stale);
  });
}

TEST_CASE("slots out of range, wrong chunk sizes and a budget below one chunk are refused", "[kv][disk]") {
  pensieve::testing::TempDir dir("disk-chunks");
  run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
    DiskTierFileConfig tiny = disk_layout_of(pool_config(1));
    tiny.dir = dir.path();
    tiny.budget_bytes = 4096;
    auto refused = DiskTierFile::open(ring, tiny);
    REQUIRE_FALSE(refused.has_value());
    CHECK_THAT(refused.error().message, Catch::Contains("holds no chunk"));

    auto store = open_store(ring, dir.path(), 2);
    KvPool source(pool_config(1));
    const ChunkResult<void> beyond = co_await write_one(*store, source, DiskSlot{2}, 0);
    CHECK(fault_of(beyond) == ChunkFault::invalid);
    std::vector<std::byte> small(16);
    const std::vector<std::span<const std::byte>> wrong{small, small, small};
    const auto tokens = tokens_of(0);
    const ChunkResult<void> sized = co_await store->write(DiskSlot{0}, std::span(wrong), tokens);
    CHECK(fault_of(sized) == ChunkFault::invalid);
    // A released slot no longer reads.
    const ChunkResult<void> w = co_await write_one(*store, source, DiskSlot{1}, 0);
    REQUIRE(w.has_value());
    store->release(DiskSlot{1});
    const ChunkResult<void> r = co_await read_one(*store, source, DiskSlot{1}, 0);
    CHECK(fault_of(r) == ChunkFault::invalid);
  });
}

TEST_CASE("opening the store replaces a previous run's chunk file and closing removes it", "[kv][disk]") {
  pensieve::testing::TempDir dir("disk-chunks");
  const auto path = dir.path() / DiskTierFile::file_name;
  {
    const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, "junk", 4) == 4);
    ::close(fd);
  }
  run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
    auto store = open_store(ring, dir.path(), 4);
    CHECK(std::filesystem::file_size(path) == 4 * store->slot_bytes());
    CHECK(file_bytes(*store, 0, 4) == std::vector<std::byte>(4));
    store.reset();
    CHECK_FALSE(std::filesystem::exists(path));
    co_return;
  });
}

TEST_CASE("the chunk checksum sees a flipped bit anywhere in whole blocks and in the tail", "[kv][disk]") {
  std::vector<unsigned char> data(2 * 64 * 1024 + 1000);
  std::mt19937 rng(21);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const std::uint32_t good = chunk_checksum(0, data.data(), data.size());
  CHECK(chunk_checksum(0, data.data(), data.size()) == good);
  for (std::size_t at = 0; at < data.size(); at += 997) {
    data[at] ^= 0x08;
    CHECK(chunk_checksum(0, data.data(), data.size()) != good);
    data[at] ^= 0x08;
  }
  // Swapping two lanes' contents is a different payload too.
  std::swap_ranges(data.begin(), data.begin() + 16 * 1024, data.begin() + 16 * 1024);
  CHECK(chunk_checksum(0, data.data(), data.size()) != good);
}
