// The disk KV tier across a restart of the engine: with a history folder
// and a disk tier, a conversation's KV that went out to disk in one engine
// is found by the next engine on the same folders, and its next turn reads
// that KV from disk instead of recomputing it, with the tokens of an
// engine that recomputes everything. A chunk file damaged between the two
// is caught when read and recomputed, never served.
#include "tests/actors/disk_restart_support.hpp"

#include "gpu/kv/chunk_header.hpp"

#include <fstream>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

// Room on the device for about one conversation, a host tier of a few
// chunks and a disk tier of plenty: idle KV goes out to disk between turns.
actors::EngineOptions disk_options(const TempDir& dir) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.kv_block_tokens = 16;
  o.kv_cache_mb = 64;
  o.kv_device_blocks = 12;
  o.kv_host_blocks = 4;
  o.kv_disk_dir = (dir / "kv").string();
  o.kv_disk_bytes = 64 * 24576;  // 64 chunks of stories260K at 16 tokens (20 KiB + a 4 KiB header each)
  o.kv_cache.swap_out_watermark = 1.0;
  o.history_dir = (dir / "history").string();
  return o;
}

const std::vector<std::string> other_turns{"A dog ran into the park to play.", "Who did the dog meet there?"};

// Turns 0 and 1 of "c0", then three other conversations' turns, which push
// c0's KV out of the device, through the host, to disk.
void first_engine(asio::io_context& io, const actors::EngineOptions& o,
                  const std::vector<std::vector<std::int32_t>>& straight) {
  auto e = make_stories_engine(o);
  REQUIRE(e->create_conversation("t", "c0").has_value());
  for (std::size_t i = 0; i < 2; ++i) CHECK(run(io, greedy_turn_tokens(*e, "c0", story_turns()[i])) == straight[i]);
  for (const std::string id : {"c1", "c2", "c3"}) {
    REQUIRE(e->create_conversation("t", id).has_value());
    for (const auto& text : other_turns) run(io, greedy_turn_tokens(*e, id, text));
  }
  const auto stats = run(io, e->stats());
  INFO("spilled " << stats.tiers.spill_chunks);
  REQUIRE(stats.tiers.spill_chunks > 0);
}

}  // namespace

TEST_CASE("after a restart a conversation's next turn reads its KV from disk, with a recomputing engine's tokens",
          "[engine][tiers][disk][history]") {
  asio::io_context io;
  const auto straight = straight_turns(io);
  TempDir dir("engine-disk-restart");
  const actors::EngineOptions o = disk_options(dir);
  first_engine(io, o, straight);

  const Restarted r = last_turn(io, o);
  const actors::TierStats& t = r.stats.tiers;
  INFO("found paths " << t.found_disk_paths << " chunks " << t.found_disk_chunks << " disk hits "
                      << t.hit_tokens_disk << " recomputed " << t.recomputed_tokens << " cached "
                      << r.done.cached_tokens << " of " << r.done.prompt_tokens);
  CHECK(r.tokens == straight[2]);
  CHECK(t.found_disk_paths > 0);
  CHECK(t.restore_chunks > 0);
  CHECK(t.hit_tokens_disk > 0);
  CHECK(r.done.cached_tokens == t.hit_tokens_disk);  // the prompt tokens that came from disk
  CHECK(t.corrupt_chunks == 0);
}

TEST_CASE("after a restart a chunk file damaged on disk is caught when read and recomputed, with the same tokens",
          "[engine][tiers][disk][history]") {
  asio::io_context io;
  const auto straight = straight_turns(io);
  TempDir dir("engine-disk-restart");
  const actors::EngineOptions o = disk_options(dir);
  first_engine(io, o, straight);
  {
    // One byte of every chunk's payload (its headers stay intact: the scan keeps them).
    const auto file = dir / "kv" / "kv-chunks.bin";
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.is_open());
    kv::ChunkHeader h;
    f.read(reinterpret_cast<char*>(&h), sizeof h);  // slot 0 is the first one spilled to
    REQUIRE(h.magic == kv::ChunkHeader::magic_value);
    const std::uint64_t slot_bytes = (4096 + h.payload_bytes + 4095) / 4096 * 4096;
    for (std::uint64_t at = 4096 + 100; at < std::filesystem::file_size(file); at += slot_bytes) {
      f.seekg(std::streamoff(at));
      char c = 0;
      f.read(&c, 1);
      c = char(c ^ 0x40);
      f.seekp(std::streamoff(at));
      f.write(&c, 1);
    }
  }
  const Restarted r = last_turn(io, o);
  const actors::TierStats& t = r.stats.tiers;
  CHECK(r.tokens == straight[2]);
  CHECK(t.found_disk_paths > 0);
  CHECK(t.corrupt_chunks > 0);
  CHECK(t.hit_tokens_disk == 0);
  CHECK(r.done.cached_tokens == 0);
}
