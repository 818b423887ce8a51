// The disk KV tier at a clean exit: KV that lives only on the device (or
// the host) is written to disk before the engine goes, so that the next
// engine on the same folders reads the conversation's KV back instead of
// recomputing it, with the tokens of an engine that recomputes everything.
#include "tests/actors/disk_restart_support.hpp"

#include <fstream>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

// Room on the device for every turn below, no ahead-of-time moves: the KV
// stays on the device until the exit. A host tier of 2 chunks, so a flush of
// more chunks has to pass them through it a few at a time.
actors::EngineOptions device_only_options(const TempDir& dir, std::int32_t flush_s) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.kv_block_tokens = 16;
  o.kv_cache_mb = 64;
  o.kv_device_blocks = 32;
  o.kv_host_blocks = 2;
  o.kv_disk_dir = (dir / "kv").string();
  o.kv_disk_bytes = 64 * 24576;  // 64 chunks of stories260K at 16 tokens (20 KiB + a 4 KiB header each)
  o.kv_cache.swap_out_watermark = 0.0;
  o.history_dir = (dir / "history").string();
  o.kv_flush_on_exit_s = flush_s;
  return o;
}

struct FirstRun {
  std::int32_t device_chunks = 0;  // c0's, all on the device before the exit
  actors::KvFlushReport flush;
};

// Turns 0 and 1 of "c0"; then the exit, its flush asked for explicitly (as
// the server does, to log it) or left to the destructor.
FirstRun first_engine(asio::io_context& io, const actors::EngineOptions& o,
                      const std::vector<std::vector<std::int32_t>>& straight, bool ask_flush) {
  auto e = make_stories_engine(o);
  REQUIRE(e->create_conversation("t", "c0").has_value());
  for (std::size_t i = 0; i < 2; ++i) CHECK(run(io, greedy_turn_tokens(*e, "c0", story_turns()[i])) == straight[i]);
  const auto placed = run(io, e->kv_placement("t", "c0"));
  REQUIRE(placed.has_value());
  const auto stats = run(io, e->stats());
  CHECK(stats.tiers.spill_chunks == 0);  // nothing on disk before the exit
  CHECK(placed->host == 0);
  CHECK(placed->disk == 0);
  FirstRun r;
  r.device_chunks = placed->device;
  if (ask_flush) {
    r.flush = e->flush_kv_to_disk();
    CHECK(e->flush_kv_to_disk().chunks_written == 0);  // once: the second is a no-op
  }
  return r;
}

// The restarted engine's host tier holds every chunk of c0 at once (a
// restore lands in a host slot and stays there until its turn runs).
Restarted last_turn_all_on_host(asio::io_context& io, actors::EngineOptions o) {
  o.kv_host_blocks = 16;
  return last_turn(io, o);
}

}  // namespace

TEST_CASE("at a clean exit device-only KV is flushed to disk and the restarted engine reads it back",
          "[engine][tiers][disk][history][flush]") {
  asio::io_context io;
  const auto straight = straight_turns(io);
  TempDir dir("engine-disk-flush");
  const actors::EngineOptions o = device_only_options(dir, 30);
  const FirstRun first = first_engine(io, o, straight, true);
  INFO("device chunks " << first.device_chunks << " written " << first.flush.chunks_written << " left "
                        << first.flush.chunks_left << " in " << first.flush.seconds << " s");
  REQUIRE(first.device_chunks > 2);  // more than the host tier holds at once
  CHECK(first.flush.chunks_written == first.device_chunks);
  CHECK(first.flush.chunks_left == 0);
  CHECK(first.flush.waiting == 0);
  CHECK_FALSE(first.flush.timed_out);

  const Restarted r = last_turn_all_on_host(io, o);
  const actors::TierStats& t = r.stats.tiers;
  INFO("found chunks " << t.found_disk_chunks << " disk hits " << t.hit_tokens_disk << " cached "
                       << r.done.cached_tokens << " of " << r.done.prompt_tokens);
  CHECK(r.tokens == straight[2]);
  CHECK(t.found_disk_chunks == std::uint64_t(first.device_chunks));
  CHECK(t.found_disk_paths == 1);
  CHECK(t.found_disk_discarded == 0);
  CHECK(t.disk_scan_labelled == std::uint64_t(first.device_chunks));
  CHECK(t.restore_chunks == std::uint64_t(first.device_chunks));
  CHECK(t.restores_recomputed == 0);
  CHECK(t.hit_tokens_disk > 16 * (first.device_chunks - 1));  // every chunk but the last, partial one, at least
  CHECK(r.done.cached_tokens == t.hit_tokens_disk);
  CHECK(t.recomputed_tokens == 0);
  CHECK(t.corrupt_chunks == 0);
}

TEST_CASE("the destructor flushes too, and with the flush off a restart finds nothing and recomputes",
          "[engine][tiers][disk][history][flush]") {
  asio::io_context io;
  const auto straight = straight_turns(io);
  for (const std::int32_t flush_s : {30, 0}) {
    TempDir dir("engine-disk-flush");
    const actors::EngineOptions o = device_only_options(dir, flush_s);
    const FirstRun first = first_engine(io, o, straight, false);
    const Restarted r = last_turn_all_on_host(io, o);
    const actors::TierStats& t = r.stats.tiers;
    INFO("flush " << flush_s << " s: found chunks " << t.found_disk_chunks << " disk hits " << t.hit_tokens_disk);
    CHECK(r.tokens == straight[2]);
    if (flush_s > 0) {
      CHECK(t.found_disk_chunks == std::uint64_t(first.device_chunks));
      CHECK(r.done.cached_tokens == t.hit_tokens_disk);
      CHECK(t.hit_tokens_disk > 0);
    } else {
      CHECK(t.disk_scan_labelled == 0);
      CHECK(t.found_disk_chunks == 0);
      CHECK(t.hit_tokens_disk == 0);
      CHECK(r.done.cached_tokens == 0);
    }
  }
}

TEST_CASE("with --kv-disk-restore never a restart recomputes what the scan registered, counted",
          "[engine][tiers][disk][history][flush]") {
  asio::io_context io;
  const auto straight = straight_turns(io);
  TempDir dir("engine-disk-flush");
  actors::EngineOptions o = device_only_options(dir, 30);
  const FirstRun first = first_engine(io, o, straight, false);
  o.kv_cache.disk_restore = actors::DiskRestoreMode::recompute;
  const Restarted r = last_turn_all_on_host(io, o);
  const actors::TierStats& t = r.stats.tiers;
  CHECK(r.tokens == straight[2]);
  CHECK(t.found_disk_chunks == std::uint64_t(first.device_chunks));
  CHECK(t.restores_recomputed == std::uint64_t(first.device_chunks));
  CHECK(t.restore_chunks == 0);
  CHECK(t.hit_tokens_disk == 0);
  CHECK(r.done.cached_tokens == 0);
}

TEST_CASE("a restarted path whose first chunk was lost recomputes that front and reads the rest from disk",
          "[engine][tiers][disk][history][flush]") {
  asio::io_context io;
  const auto straight = straight_turns(io);
  TempDir dir("engine-disk-flush");
  const actors::EngineOptions o = device_only_options(dir, 30);
  const FirstRun first = first_engine(io, o, straight, true);
  REQUIRE(first.flush.chunks_written == first.device_chunks);
  {
    // The flush wrote the path front to back from slot 0: its first chunk's header goes.
    const auto file = dir / "kv" / "kv-chunks.bin";
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.is_open());
    const std::vector<char> zeros(4096, 0);
    f.write(zeros.data(), std::streamsize(zeros.size()));
  }
  const Restarted r = last_turn_all_on_host(io, o);
  const actors::TierStats& t = r.stats.tiers;
  INFO("found chunks " << t.found_disk_chunks << " disk hits " << t.hit_tokens_disk << " recomputed "
                       << t.recomputed_tokens << " cached " << r.done.cached_tokens);
  CHECK(r.tokens == straight[2]);
  CHECK(t.disk_scan_labelled == std::uint64_t(first.device_chunks - 1));
  CHECK(t.found_disk_chunks == std::uint64_t(first.device_chunks - 1));
  CHECK(t.found_disk_paths == 1);
  CHECK(t.found_disk_front_missing == 1);
  CHECK(t.found_disk_discarded == 0);
  CHECK(t.restore_chunks == std::uint64_t(first.device_chunks - 1));
  CHECK(t.hit_tokens_disk > 16 * (first.device_chunks - 2));  // every chunk but the lost and the last one, at least
  CHECK(t.recomputed_tokens == 16);  // the lost first chunk
  CHECK(r.done.cached_tokens == t.hit_tokens_disk);
}
