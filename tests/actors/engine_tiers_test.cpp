// The tiered KV cache's acceptance invariant: with tier budgets so small
// that conversations' KV is pushed from the device to the host, spilled to
// disk, dropped and recomputed while real conversations from ../shared/data
// are replayed round-robin (every conversation comes back after the others
// took its room), greedy outputs equal the all-resident run token for token.
// A chunk file corrupted on disk is detected when read back and its chunks
// are recomputed, with the same tokens.
#include "tests/actors/engine_fixture.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_model.hpp"

#include <filesystem>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

struct Replay {
  std::map<std::string, ConversationRecord> records;
  actors::SchedulerStats scheduler;
  actors::SwapStats swap;
};

// Turn t of every conversation, then turn t + 1 of every one, ...; calls
// `between_turns` between one turn and the next.
asio::awaitable<Replay> round_robin(actors::Engine& engine, const std::vector<std::vector<std::string>>& convs,
                                    std::int32_t max_tokens, std::function<void()> between_turns) {
  Replay out;
  std::size_t rounds = 0;
  for (std::size_t i = 0; i < convs.size(); ++i) {
    const std::string id = "c" + std::to_string(i);
    auto created = engine.create_conversation("t", id);
    REQUIRE(created.has_value());
    out.records[id];
    rounds = std::max(rounds, convs[i].size());
  }
  for (std::size_t round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < convs.size(); ++i) {
      if (round >= convs[i].size()) continue;
      const std::string id = "c" + std::to_string(i);
      if ((round > 0 || i > 0) && between_turns) between_turns();
      TurnRecord turn;
      actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
        turn.text += d.text;
        for (const auto& t : d.tokens) turn.tokens.push_back(t.token);
        co_return true;
      };
      std::vector<model::ChatMessage> messages{{"user", convs[i][round]}};
      auto result =
          co_await send_turn(engine, "t", id, std::move(messages), greedy(max_tokens), sink);
      REQUIRE(result.has_value());
      turn.summary = *result;
      out.records[id].turns.push_back(std::move(turn));
    }
  }
  for (auto& [id, record] : out.records) {
    auto snapshot = co_await engine.snapshot("t", id);
    REQUIRE(snapshot.has_value());
    record.history = snapshot->tokens;
  }
  out.scheduler = co_await engine.stats();
  out.swap = co_await engine.swap_stats();
  co_return out;
}

Replay replay(actors::EngineOptions options, const std::vector<std::vector<std::string>>& convs,
              std::int32_t max_tokens, std::function<void()> between_turns = {}) {
  asio::io_context io;  // outlives the engine, which completes operations on it
  auto engine = actors::Engine::create(stories_model(), options);
  REQUIRE(engine.has_value());
  auto future = asio::co_spawn(io, round_robin(**engine, convs, max_tokens, std::move(between_turns)),
                               asio::use_future);
  io.run();
  return future.get();
}

actors::EngineOptions resident_options() {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.kv_block_tokens = 16;
  o.kv_cache_mb = 64;  // every conversation's KV stays on the device
  return o;
}

// Room on the device for about one conversation; a host tier of a few
// chunks; a disk tier of a few more. Everything else is dropped.
actors::EngineOptions tiny_tier_options(const TempDir& disk, actors::EvictionPolicyKind policy) {
  actors::EngineOptions o = resident_options();
  o.kv_device_blocks = 24;
  o.kv_host_blocks = 4;
  o.kv_disk_dir = (disk / "kv").string();
  o.kv_disk_bytes = 16 * 24576;  // 16 chunks of stories260K at 16 tokens (20 KiB + a 4 KiB header each)
  o.kv_cache.eviction_policy = policy;
  // Idle chunks leave the device and the host as soon as they can: every
  // conversation's KV goes out to the host and on to disk between turns.
  o.kv_cache.swap_out_watermark = 1.0;
  return o;
}

std::string describe(const Replay& r) {
  const actors::TierStats& t = r.scheduler.tiers;
  return "swap_in " + std::to_string(r.swap.swap_in_chunks) + " swap_out " + std::to_string(r.swap.swap_out_chunks) +
         " spill " + std::to_string(r.swap.spill_chunks) + " restore " + std::to_string(r.swap.restore_chunks) +
         " corrupt " + std::to_string(r.swap.restore_corrupt) + " hits device/host/disk " +
         std::to_string(t.hit_tokens_device) + "/" + std::to_string(t.hit_tokens_host) + "/" +
         std::to_string(t.hit_tokens_disk) + " recomputed " + std::to_string(t.recomputed_tokens);
}

void check_same_tokens(const Replay& got, const Replay& want) {
  REQUIRE(got.records.size() == want.records.size());
  for (const auto& [id, rec] : want.records) {
    const ConversationRecord& other = got.records.at(id);
    INFO("conversation " << id);
    REQUIRE(rec.turns.size() == other.turns.size());
    for (std::size_t t = 0; t < rec.turns.size(); ++t) {
      INFO("turn " << t);
      CHECK(other.turns[t].tokens == rec.turns[t].tokens);
      CHECK(other.turns[t].text == rec.turns[t].text);
      CHECK(other.turns[t].summary.prompt_tokens == rec.turns[t].summary.prompt_tokens);
    }
    CHECK(other.history == rec.history);
  }
}

// Flips one byte in every 4 KiB block of the disk tier's chunk file, so
// every chunk on disk now fails its checks.
void corrupt_chunk_file(const std::filesystem::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f.is_open());
  const auto size = std::filesystem::file_size(file);
  for (std::uint64_t at = 8; at < size; at += 4096) {
    f.seekg(std::streamoff(at));
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x40);
    f.seekp(std::streamoff(at));
    f.write(&c, 1);
  }
}

}  // namespace

TEST_CASE("KV pushed through host, disk and recompute gives the all-resident run's tokens", "[engine][tiers]") {
  const auto policy = GENERATE(actors::EvictionPolicyKind::cost_aware, actors::EvictionPolicyKind::lru);
  INFO("policy " << (policy == actors::EvictionPolicyKind::lru ? "lru" : "cost-aware"));
  const auto convs = user_turns("oasst.jsonl", 5, 3, 60);
  const Replay resident = replay(resident_options(), convs, 16);
  TempDir disk("tiers");
  const Replay tiered = replay(tiny_tier_options(disk, policy), convs, 16);
  INFO(describe(tiered));
  check_same_tokens(tiered, resident);
  // Every path was taken: out to the host, on to disk, back to the host
  // and the device, and dropped chunks recomputed. (With the watermark at
  // 1.0 idle chunks pass through the host to disk, so returning ones are
  // disk hits; host hits are covered by the swap engine's own tests.)
  const actors::TierStats& t = tiered.scheduler.tiers;
  CHECK(tiered.swap.swap_out_chunks > 0);
  CHECK(tiered.swap.swap_in_chunks > 0);
  CHECK(tiered.swap.spill_chunks > 0);
  CHECK(tiered.swap.restore_chunks > 0);
  CHECK(tiered.swap.restore_corrupt == 0);
  CHECK(t.hit_tokens_disk > 0);
  CHECK(t.recomputed_tokens > 0);
  // The resident run recomputed nothing and moved nothing.
  CHECK(resident.scheduler.tiers.recomputed_tokens == 0);
  CHECK(resident.swap.swap_out_chunks == 0);
}

TEST_CASE("a corrupted chunk file is detected on restore and its chunks recomputed, with the same tokens",
          "[engine][tiers][disk]") {
  const auto convs = user_turns("oasst.jsonl", 5, 3, 60);
  const Replay resident = replay(resident_options(), convs, 16);
  TempDir disk("tiers-corrupt");
  const auto file = disk / "kv" / "kv-chunks.bin";
  const Replay tiered = replay(tiny_tier_options(disk, actors::EvictionPolicyKind::cost_aware), convs, 16,
                               [&] { corrupt_chunk_file(file); });
  INFO(describe(tiered));
  check_same_tokens(tiered, resident);
  CHECK(tiered.swap.restore_corrupt > 0);
  CHECK(tiered.scheduler.tiers.corrupt_chunks > 0);
  CHECK(tiered.scheduler.tiers.recomputed_tokens > 0);
}

TEST_CASE("KV copied out to a roomy host tier comes back as host hits, with the all-resident run's tokens",
          "[engine][tiers]") {
  const auto convs = user_turns("oasst.jsonl", 5, 3, 60);
  const Replay resident = replay(resident_options(), convs, 16);
  actors::EngineOptions o = resident_options();
  o.kv_device_blocks = 24;  // about one conversation
  o.kv_host_blocks = 256;   // every conversation's KV fits on the host; no disk tier
  o.kv_cache.swap_out_watermark = 1.0;
  const Replay tiered = replay(o, convs, 16);
  INFO(describe(tiered));
  check_same_tokens(tiered, resident);
  const actors::TierStats& t = tiered.scheduler.tiers;
  CHECK(tiered.swap.swap_out_chunks > 0);
  CHECK(tiered.swap.swap_in_chunks > 0);
  CHECK(t.hit_tokens_host > 0);
  CHECK(t.hit_tokens_disk == 0);
  CHECK(tiered.swap.spill_chunks == 0);
}

TEST_CASE("a stateful engine on the CPU backend has a host tier by default, --no-state and 0 MiB have none",
          "[engine][tiers]") {
  auto host_slots = [](actors::EngineOptions o) {
    asio::io_context io;
    auto engine = actors::Engine::create(tiny_model(), o);
    REQUIRE(engine.has_value());
    auto f = asio::co_spawn(io, (*engine)->swap_stats(), asio::use_future);
    io.run();
    return f.get().host_slots;
  };
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_cache_mb = 16;
  REQUIRE(o.kv_host_mb == actors::kAutoKvHostMb);
  const std::int64_t want_mb = actors::default_kv_host_mb();
  CHECK(want_mb > 0);
  CHECK(want_mb <= 4096);
  // The tiny model's chunk: 2 layers x K and V x 2 KV heads x 16 dims x 32 tokens of f16 (the default).
  REQUIRE(o.kv_dtype == kv::KvDType::f16);
  const std::int64_t chunk_bytes = 2 * 2 * 2 * 16 * 32 * 2;
  CHECK(host_slots(o) == (want_mb << 20) / chunk_bytes);
  actors::EngineOptions off = o;
  off.kv_host_mb = 0;
  CHECK(host_slots(off) == 0);
  actors::EngineOptions stateless = o;
  stateless.scheduler.keep_kv = false;
  CHECK(host_slots(stateless) == 0);
}

TEST_CASE("a disk KV tier without a host tier, or with --no-state, is refused at start-up, not ignored",
          "[engine][tiers][errors][disk]") {
  TempDir dir("engine-disk-refused");
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_cache_mb = 16;
  o.kv_disk_dir = dir.path().string();
  o.kv_disk_bytes = 1 << 20;  // what --kv-disk-gb sets, at a test's size
  auto error_of = [](actors::EngineOptions options) {
    auto engine = actors::Engine::create(tiny_model(), std::move(options));
    REQUIRE_FALSE(engine.has_value());
    return engine.error().message;
  };
  actors::EngineOptions no_host = o;
  no_host.kv_host_mb = 0;
  const std::string host_message = error_of(no_host);
  INFO(host_message);
  CHECK(host_message.starts_with("--kv-disk-gb: the disk KV tier is fed by the host tier, and --kv-host-mb 0"));
  actors::EngineOptions stateless = o;
  stateless.scheduler.keep_kv = false;
  CHECK(error_of(stateless) == "--kv-disk-gb: --no-state keeps no KV, so a disk KV tier would be unused");
  // With the host tier (automatic here) the same disk budget starts.
  asio::io_context io;
  auto engine = actors::Engine::create(tiny_model(), o);
  INFO((engine ? std::string() : engine.error().message));
  REQUIRE(engine.has_value());
  auto f = asio::co_spawn(io, (*engine)->swap_stats(), asio::use_future);
  io.run();
  CHECK(f.get().disk_slots > 0);
}
