// The disk KV tier across a restart: a persistent store keeps the previous
// run's file, its scan finds the labelled chunks of this model and layout
// (headers only) and they read back byte for byte; unlabelled, corrupt,
// foreign-model and other-layout slots are free; a kept chunk whose payload
// went bad is caught when it is read, never returned as data.
#include "gpu/kv/disk_tier_file.hpp"

#include "../temp_dir.hpp"
#include "tests/gpu/io_ring_runner.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

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

constexpr std::uint64_t model_a = 0xa0a0, model_b = 0xb0b0;

KvPoolConfig pool_config(std::int32_t blocks, std::int32_t heads = 2) {
  return KvPoolConfig{.num_blocks = blocks, .block_tokens = 4, .n_layers = 3, .n_kv_heads = heads, .head_dim = 40,
                      .dtype = KvDType::f16, .tier = Tier::host, .poison_freed = false};
}

std::unique_ptr<DiskTierFile> open_store(std::shared_ptr<rt::IoRing> ring, const std::filesystem::path& dir,
                                         std::uint32_t slots, std::uint64_t identity, std::int32_t heads = 2) {
  DiskTierFileConfig c = disk_layout_of(pool_config(1, heads));
  c.dir = dir;
  c.identity = identity;
  c.persistent = true;
  const std::uint64_t slot_bytes =
      rt::AlignedBuffer::round_up(DiskTierFile::header_block_bytes + c.n_layers * c.layer_bytes, 4096);
  c.budget_bytes = slots * slot_bytes;
  auto store = DiskTierFile::open(std::move(ring), c);
  if (!store) FAIL("open: " << store.error().message);
  return std::move(*store);
}

ChunkLabel label_of(std::uint32_t index) { return ChunkLabel{"tenant\x1f", index, 100 + index, 200 + index}; }
std::vector<std::int32_t> tokens_of(std::int32_t first) { return {first, first + 1, first + 2, first + 3}; }

void flip_byte(const std::filesystem::path& path, std::uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  unsigned char b = 0;
  REQUIRE(::pread(fd, &b, 1, off_t(offset)) == 1);
  b ^= 0x10;
  REQUIRE(::pwrite(fd, &b, 1, off_t(offset)) == 1);
  ::close(fd);
}

// Writes block s of a random pool to slot s, labelled label_of(s) for
// tokens_of(10 * s), except slot `unlabelled` (no label).
asio::awaitable<void> write_slots(DiskTierFile& store, const KvPool& pool, std::uint32_t n,
                                  std::uint32_t unlabelled) {
  for (std::uint32_t s = 0; s < n; ++s) {
    const auto tokens = tokens_of(std::int32_t(10 * s));
    const ChunkLabel label = label_of(s);
    auto r = co_await store.write(DiskSlot{s}, pool, BlockId{s}, tokens, s == unlabelled ? nullptr : &label);
    REQUIRE(r.has_value());
  }
}

}  // namespace

TEST_CASE("a persistent store's labelled chunks are found by the next open and read back byte for byte",
          "[kv][disk]") {
  pensieve::testing::TempDir dir("disk-restart");
  run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
    KvPool source(pool_config(4));
    std::mt19937 rng(5);
    for (std::int32_t l = 0; l < 3; ++l) {
      auto* p = static_cast<unsigned char*>(source.layer(l).data);
      for (std::size_t i = 0; i < source.layer_bytes(); ++i) p[i] = static_cast<unsigned char>(rng());
    }
    {
      auto first = open_store(ring, dir.path(), 4, model_a);
      CHECK(first->scanned().empty());
      CHECK(first->scan_report().scanned == 0);  // a fresh file
      co_await write_slots(*first, source, 4, 3);
    }
    CHECK(std::filesystem::exists(dir.path() / DiskTierFile::file_name));
    auto second = open_store(ring, dir.path(), 4, model_a);
    const DiskScanReport& report = second->scan_report();
    CHECK(report.scanned == 4);
    CHECK(report.labelled == 3);
    CHECK(report.empty == 1);  // slot 3: written without a label
    REQUIRE(second->scanned().size() == 3);
    KvPool back(pool_config(4));
    for (std::uint32_t s = 0; s < 3; ++s) {
      const ScannedChunk& c = second->scanned()[s];
      CHECK(c.header.slot == s);
      CHECK(c.tokens == tokens_of(std::int32_t(10 * s)));
      CHECK(c.label.ns == "tenant\x1f");
      CHECK(c.label.block_index == s);
      CHECK(c.label.parent_chain == 100 + s);
      CHECK(c.label.chain == 200 + s);
      auto r = co_await second->read(DiskSlot{s}, back, BlockId{s}, c.tokens);
      if (!r) FAIL_CHECK(r.error().message);
      const auto a = chunk_layers(source, BlockId{s});
      const auto b = chunk_layers(back, BlockId{s});
      for (std::size_t l = 0; l < a.size(); ++l) CHECK(std::memcmp(a[l].data(), b[l].data(), a[l].size()) == 0);
    }
    // The unlabelled slot is not readable, and a kept one read for other tokens is refused.
    const auto t3 = tokens_of(30);
    auto r3 = co_await second->read(DiskSlot{3}, back, BlockId{3}, t3);
    CHECK((!r3 && r3.error().fault == ChunkFault::invalid));
    auto wrong = co_await second->read(DiskSlot{0}, back, BlockId{0}, t3);
    CHECK((!wrong && wrong.error().fault == ChunkFault::wrong_tokens));
  });
}

TEST_CASE("a restart discards other models' and layouts' chunks and torn headers, and catches a bad payload "
          "when the chunk is read",
          "[kv][disk]") {
  pensieve::testing::TempDir dir("disk-restart");
  run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
    KvPool source(pool_config(4));
    std::uint64_t slot_bytes = 0;
    {
      auto first = open_store(ring, dir.path(), 4, model_a);
      slot_bytes = first->slot_bytes();
      co_await write_slots(*first, source, 4, 99);
    }
    const auto path = dir.path() / DiskTierFile::file_name;
    flip_byte(path, 1 * slot_bytes + 20);                   // slot 1's header
    flip_byte(path, 2 * slot_bytes + sizeof(ChunkHeader));  // slot 2's stored token ids
    flip_byte(path, 3 * slot_bytes + 4096 + 77);            // slot 3's payload: seen only when read
    {
      auto same_model = open_store(ring, dir.path(), 4, model_a);
      REQUIRE(same_model->scanned().size() == 2);  // slots 0 and 3
      CHECK(same_model->scanned()[1].header.slot == 3);
      CHECK(same_model->scan_report().corrupt == 2);  // slots 1 and 2
    }
    {
      auto other_model = open_store(ring, dir.path(), 4, model_b);
      CHECK(other_model->scanned().empty());
      CHECK(other_model->scan_report().foreign == 3);  // the model is checked before the token ids
      CHECK(other_model->scan_report().corrupt == 1);  // slot 1's header
    }
    {
      auto other_layout = open_store(ring, dir.path(), 2, model_a, 4);
      CHECK(other_layout->scanned().empty());
    }
  });
  run_with_ring([&](std::shared_ptr<rt::IoRing> ring) -> asio::awaitable<void> {
    // The other layout rewrote nothing, but cut the file: write again, then damage slot 3's payload.
    KvPool source(pool_config(4));
    KvPool back(pool_config(4));
    std::uint64_t slot_bytes = 0;
    {
      auto first = open_store(ring, dir.path(), 4, model_a);
      slot_bytes = first->slot_bytes();
      co_await write_slots(*first, source, 4, 99);
    }
    flip_byte(dir.path() / DiskTierFile::file_name, 3 * slot_bytes + 4096 + 77);
    auto again = open_store(ring, dir.path(), 4, model_a);
    CHECK(again->scanned().size() == 4);  // headers only: the payload is not read at open
    const auto t3 = tokens_of(30);
    auto r = co_await again->read(DiskSlot{3}, back, BlockId{3}, t3);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().fault == ChunkFault::corrupt);
    CHECK(r.error().unusable_chunk());
  });
}

TEST_CASE("a chunk header block stores the token ids and namespace a later run needs, and the scan tells "
          "empty, unlabelled, corrupt and foreign blocks apart",
          "[kv][disk]") {
  const ChunkExpectation e{7, 2, 100, 200, 0x42, 3, model_a};
  const std::vector<std::int32_t> tokens{5, 6, 7};
  std::vector<std::byte> block(chunk_header_block_bytes);
  CHECK(scan_chunk_header(block, e, "s").error().fault == ChunkFault::empty);

  const ChunkLabel label{"acme\x1fsalt", 2, 11, 0};
  write_chunk_header_block(block, seal_chunk_header(e, 9, tokens, label), tokens, label);
  auto ok = scan_chunk_header(block, e, "s");
  REQUIRE(ok.has_value());
  CHECK(ok->tokens == tokens);
  CHECK(ok->label.ns == label.ns);
  CHECK(ok->header.payload_crc32 == 9);
  // Its run and generation are what a read then expects; they are not checked by the scan.
  ChunkExpectation later = e;
  later.run_id = 1;
  later.generation = 99;
  CHECK(scan_chunk_header(block, later, "s").has_value());
  later.identity = model_b;
  CHECK(scan_chunk_header(block, later, "s").error().fault == ChunkFault::foreign);
  ChunkExpectation moved = e;
  moved.slot = 8;
  CHECK(scan_chunk_header(block, moved, "s").error().fault == ChunkFault::foreign);

  write_chunk_header_block(block, seal_chunk_header(e, 9, tokens), tokens, {});
  CHECK(scan_chunk_header(block, e, "s").error().fault == ChunkFault::empty);

  // A namespace too long for the header block: written without a label.
  const ChunkLabel huge{std::string(5000, 'x'), 0, 1, 0};
  const ChunkHeader h = seal_chunk_header(e, 9, tokens, huge);
  CHECK(h.flags == 0);
  write_chunk_header_block(block, h, tokens, huge);
  CHECK(scan_chunk_header(block, e, "s").error().fault == ChunkFault::empty);

  write_chunk_header_block(block, seal_chunk_header(e, 9, tokens, label), tokens, label);
  block[sizeof(ChunkHeader) + 12 + 1] ^= std::byte{1};  // the namespace's second byte
  CHECK(scan_chunk_header(block, e, "s").error().fault == ChunkFault::corrupt);
  CHECK(scan_chunk_header(std::span(block).first(100), e, "s").error().fault == ChunkFault::corrupt);
}
