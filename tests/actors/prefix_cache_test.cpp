// The prefix cache, below the engine: unnamed paths in the KV cache
// manager's index, namespaced, looked up by the longest full-block prefix
// (a hash chain: 10,000 paths), continued by a stateless turn in the
// scheduler, and freed whole when the cache is cleared; conversations'
// first turns sharing another path's blocks, freed when no path holds them.
#include "actors/kv_cache_manager.hpp"
#include "actors/scheduler_core.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <numeric>
#include <vector>

using namespace pensieve;
using namespace pensieve::actors;

namespace {

std::vector<std::int32_t> iota_tokens(std::size_t n, std::int32_t first = 10) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<std::int32_t> joined(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Caches `tokens` as the unnamed path `path` of namespace `ns` (or as a
// named conversation's KV without `ns`), in blocks of the manager's own.
void cache(KvCacheManager& kv, std::uint64_t path, const std::vector<std::int32_t>& tokens, std::int64_t now_ns,
           std::optional<std::string> ns, std::vector<kv::BlockId>& freed) {
  kv::BlockTable table(kv.block_tokens());
  REQUIRE(kv.append(table, std::int64_t(tokens.size())).has_value());
  kv.put(ConversationId{path}, tokens, std::move(table), now_ns, freed, std::move(ns));
}

std::vector<kv::BlockId> device_blocks(const KvCacheManager& kv, std::uint64_t path) {
  std::vector<kv::BlockId> out;
  for (const ChunkView& c : kv.chunks(ConversationId{path})) out.push_back(*c.device);
  return out;
}

TurnSpec stateless_turn(std::uint64_t id, std::uint64_t anonymous, std::vector<std::int32_t> tokens,
                        std::string ns, int max_tokens) {
  TurnSpec s{TurnId{id}, ConversationId{anonymous}, std::move(tokens), {}, false, std::move(ns)};
  s.sampling.max_tokens = max_tokens;
  return s;
}

// Runs iterations, answering every sample with `token` (finishing at max
// tokens), until no work is left; cancels `cancel_after_first` once it
// has been planned once.
std::vector<TurnUpdate> run_to_end(SchedulerCore& core, std::int64_t& now,
                                   std::optional<TurnId> cancel_after_first = std::nullopt) {
  std::vector<TurnUpdate> events;
  std::map<TurnId, int> generated;
  std::map<TurnId, int> limit;
  for (int guard = 0; core.has_work() && guard < 10000; ++guard) {
    auto plan = core.plan(++now, events);
    if (plan.empty()) continue;
    std::vector<SampleResult> samples;
    for (const auto& p : plan.sequences) {
      if (p.new_sampler) limit[p.turn] = p.new_sampler->max_tokens;
      if (cancel_after_first && p.turn == *cancel_after_first) {
        core.cancel(p.turn);
        cancel_after_first.reset();
      }
      if (!p.sample) continue;
      const int n = ++generated[p.turn];
      samples.push_back({p.turn, {7, 0.0f, {}},
                         n >= limit[p.turn] ? model::FinishReason::length : model::FinishReason::none});
    }
    core.complete(plan, samples, ++now, events);
  }
  return events;
}

// Completes `plan`, each sampled turn ending at once (its sampled token is
// never fed: its KV ends with the prompt).
void end_sampled(SchedulerCore& core, const IterationPlan& plan, std::int64_t& now, std::vector<TurnUpdate>& events) {
  std::vector<SampleResult> samples;
  for (const auto& p : plan.sequences) {
    if (p.sample) samples.push_back({p.turn, {7, 0.0f, {}}, model::FinishReason::length});
  }
  core.complete(plan, samples, ++now, events);
}

std::int32_t cached_of(const std::vector<TurnUpdate>& events, TurnId turn) {
  for (const TurnUpdate& u : events) {
    if (const auto* s = std::get_if<TurnStarted>(&u.event); s && u.turn == turn) return s->cached_tokens;
  }
  FAIL("turn " << turn.value << " never started");
  return -1;
}

// Answers every sampling sequence of `plan` with a last token (length).
std::vector<SampleResult> finishing_samples(const IterationPlan& plan) {
  std::vector<SampleResult> out;
  for (const auto& p : plan.sequences) {
    if (p.sample) out.push_back({p.turn, {7, 0.0f, {}}, model::FinishReason::length});
  }
  return out;
}

}  // namespace

TEST_CASE("a stateless prompt finds the unnamed path of its namespace with the longest full-block prefix",
          "[kv_cache][prefix_cache]") {
  KvCacheManager kv({.num_blocks = 16, .block_tokens = 4}, {});
  std::vector<kv::BlockId> freed;
  cache(kv, 1, iota_tokens(10), 1, "a", freed);                             // blocks 0, 1, 2
  cache(kv, 2, joined(iota_tokens(6), {50, 51, 52, 53}), 2, "a", freed);    // blocks 3, 4, 5
  cache(kv, 3, iota_tokens(12), 3, "b", freed);                             // another namespace
  cache(kv, 4, iota_tokens(12), 4, std::nullopt, freed);                    // a named conversation
  CHECK(device_blocks(kv, 1) == std::vector<kv::BlockId>{kv::BlockId{0}, kv::BlockId{1}, kv::BlockId{2}});
  CHECK(device_blocks(kv, 2) == std::vector<kv::BlockId>{kv::BlockId{3}, kv::BlockId{4}, kv::BlockId{5}});

  auto longest = kv.find_unnamed_prefix("a", iota_tokens(14));
  REQUIRE(longest);
  CHECK(longest->path == ConversationId{1});
  CHECK(longest->tokens == 10);
  // Equal matches: the most recently active path.
  auto tie = kv.find_unnamed_prefix("a", joined(iota_tokens(5), {99, 98}));
  REQUIRE(tie);
  CHECK(tie->path == ConversationId{2});
  CHECK(tie->tokens == 5);
  // Less than one full block, another namespace, a named conversation's KV: no match.
  CHECK_FALSE(kv.find_unnamed_prefix("a", joined(iota_tokens(3), {99, 98})));
  CHECK_FALSE(kv.find_unnamed_prefix("c", iota_tokens(14)));
  auto other = kv.find_unnamed_prefix("b", iota_tokens(14));
  REQUIRE(other);
  CHECK(other->path == ConversationId{3});
  // Queried: every prompt token but the newest; matched: what the paths had.
  const TierStats s = kv.stats();
  CHECK(s.prefix_queried_tokens == 13 + 6 + 4 + 13 + 13);
  CHECK(s.prefix_matched_tokens == 10 + 5 + 12);
  CHECK(s.unnamed_paths == 3);
}

TEST_CASE("clearing the prefix cache frees every unnamed path's blocks and keeps conversations'",
          "[kv_cache][prefix_cache]") {
  KvCacheManager kv({.num_blocks = 16, .block_tokens = 4}, {});
  std::vector<kv::BlockId> freed;
  cache(kv, 1, iota_tokens(10), 1, "a", freed);
  cache(kv, 2, iota_tokens(5), 2, std::nullopt, freed);  // blocks 3, 4
  cache(kv, 3, iota_tokens(4), 3, "b", freed);           // block 5
  CHECK(kv.free_device_blocks() == 10);
  freed.clear();
  kv.forget_unnamed(freed);
  CHECK(freed == std::vector<kv::BlockId>{kv::BlockId{0}, kv::BlockId{1}, kv::BlockId{2}, kv::BlockId{5}});
  CHECK(kv.free_device_blocks() == 14);
  CHECK(device_blocks(kv, 2) == std::vector<kv::BlockId>{kv::BlockId{3}, kv::BlockId{4}});
  CHECK(kv.stats().unnamed_paths == 0);
  CHECK_FALSE(kv.find_unnamed_prefix("a", iota_tokens(10)));
}

TEST_CASE("a stateless turn continues the unnamed path its prompt starts with and leaves its KV as that path",
          "[scheduler][prefix_cache]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4},
                     {.num_blocks = 64, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(stateless_turn(1, 100, iota_tokens(10), "t", 3), now) == AdmitStatus::admitted);
  auto first = run_to_end(core, now);
  CHECK(cached_of(first, TurnId{1}) == 0);
  // The path: the prompt and the two generated tokens that were fed.
  const auto history = joined(iota_tokens(10), {7, 7});
  REQUIRE(core.cached_tokens(ConversationId{100}) == history);

  // The client resends it all (the last reply token and a new message), as
  // a new anonymous conversation: only the new tokens are computed.
  const auto next = joined(history, {7, 100, 101, 102});
  REQUIRE(core.admit(stateless_turn(2, 101, next, "t", 2), now) == AdmitStatus::admitted);
  std::vector<TurnUpdate> events;
  auto plan = core.plan(++now, events);
  REQUIRE(plan.sequences.size() == 1);
  CHECK(plan.sequences[0].start_pos == 12);
  CHECK(plan.sequences[0].tokens == std::vector<std::int32_t>{7, 100, 101, 102});
  CHECK(cached_of(events, TurnId{2}) == 12);
  end_sampled(core, plan, now, events);
  // Its KV replaced the path it continued: one path, the longer history.
  CHECK_FALSE(core.cached_tokens(ConversationId{101}));
  CHECK(core.cached_tokens(ConversationId{100}) == next);
  CHECK(core.stats().tiers.unnamed_paths == 1);

  // The same prompt in another namespace finds nothing.
  REQUIRE(core.admit(stateless_turn(3, 102, next, "other", 2), now) == AdmitStatus::admitted);
  auto other = run_to_end(core, now);
  CHECK(cached_of(other, TurnId{3}) == 0);
  CHECK(core.stats().tiers.unnamed_paths == 2);
}

TEST_CASE("with keep_kv off a stateless turn neither looks up nor leaves KV", "[scheduler][prefix_cache]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4, .keep_kv = false},
                     {.num_blocks = 64, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(stateless_turn(1, 100, iota_tokens(10), "t", 3), now) == AdmitStatus::admitted);
  run_to_end(core, now);
  REQUIRE(core.admit(stateless_turn(2, 101, iota_tokens(14), "t", 3), now) == AdmitStatus::admitted);
  auto events = run_to_end(core, now);
  CHECK(cached_of(events, TurnId{2}) == 0);
  CHECK(core.stats().tiers.prefix_queried_tokens == 0);
  CHECK(core.allocator().free_blocks() == 64);
}

TEST_CASE("after stateless turns end, one cancelled mid-prefill, clearing the cache frees every block",
          "[scheduler][prefix_cache]") {
  // 8-token iterations: the 30-token prompts take several plans to prefill.
  SchedulerCore core({.max_batch_tokens = 8, .max_running = 4, .max_admitted = 8},
                     {.num_blocks = 32, .block_tokens = 4});
  std::int64_t now = 0;
  const auto system = iota_tokens(12, 500);  // a shared system prompt: three blocks
  REQUIRE(core.admit(stateless_turn(1, 100, joined(system, iota_tokens(18, 10)), "t", 3), now) ==
          AdmitStatus::admitted);
  REQUIRE(core.admit(stateless_turn(2, 101, joined(system, iota_tokens(18, 40)), "t", 3), now) ==
          AdmitStatus::admitted);
  REQUIRE(core.admit(stateless_turn(3, 102, joined(system, iota_tokens(18, 70)), "t", 3), now) ==
          AdmitStatus::admitted);
  run_to_end(core, now, TurnId{2});
  // A later prompt with the same system prompt reuses one path's blocks of it.
  REQUIRE(core.admit(stateless_turn(4, 103, joined(system, iota_tokens(5, 90)), "t", 2), now) ==
          AdmitStatus::admitted);
  auto events = run_to_end(core, now);
  CHECK(cached_of(events, TurnId{4}) == 12);
  CHECK(core.stats().tiers.shared_device_blocks == 3);  // the system prompt's, in two paths
  CHECK(core.allocator().free_blocks() < 32);
  core.clear_unnamed_paths();
  CHECK(core.allocator().free_blocks() == 32);
  CHECK(core.stats().tiers.unnamed_paths == 0);
}

TEST_CASE("a regenerated reply shares the full blocks of the path it diverges from, which stays cached",
          "[scheduler][prefix_cache]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4},
                     {.num_blocks = 16, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(stateless_turn(1, 100, iota_tokens(10), "t", 3), now) == AdmitStatus::admitted);
  run_to_end(core, now);
  const auto path = joined(iota_tokens(10), {7, 7});  // blocks 0, 1, 2
  REQUIRE(core.cached_tokens(ConversationId{100}) == path);
  CHECK(core.allocator().free_blocks() == 13);
  // The same prompt again: blocks 0 and 1 are shared, tokens 8 and 9 are
  // computed into a block of its own (the path's third block is partial).
  REQUIRE(core.admit(stateless_turn(2, 101, iota_tokens(10), "t", 3), now) == AdmitStatus::admitted);
  std::vector<TurnUpdate> events;
  auto plan = core.plan(++now, events);
  REQUIRE(plan.sequences.size() == 1);
  CHECK(plan.sequences[0].start_pos == 8);
  CHECK(plan.sequences[0].tokens == std::vector<std::int32_t>{18, 19});
  CHECK(plan.sequences[0].blocks == std::vector<kv::BlockId>{kv::BlockId{0}, kv::BlockId{1}, kv::BlockId{3}});
  CHECK(plan.copies.empty());
  CHECK(cached_of(events, TurnId{2}) == 8);
  CHECK(core.allocator().ref_count(kv::BlockId{0}) == 2);
  end_sampled(core, plan, now, events);
  // Both paths stay, sharing two blocks; the first is untouched.
  CHECK(core.cached_tokens(ConversationId{100}) == path);
  CHECK(core.cached_tokens(ConversationId{101}) == iota_tokens(10));
  CHECK(core.stats().tiers.shared_device_blocks == 2);
  CHECK(core.stats().tiers.unnamed_paths == 2);
  CHECK(core.allocator().free_blocks() == 12);
  core.clear_unnamed_paths();
  CHECK(core.allocator().free_blocks() == 16);
  CHECK(core.stats().tiers.shared_device_blocks == 0);
}

namespace {

TurnSpec conversation_turn(std::uint64_t id, std::uint64_t conversation, std::vector<std::int32_t> tokens,
                           std::string ns, int max_tokens) {
  TurnSpec s{TurnId{id}, ConversationId{conversation}, std::move(tokens), {}, true, std::nullopt, std::move(ns)};
  s.sampling.max_tokens = max_tokens;
  return s;
}

}  // namespace

TEST_CASE("the prefix index finds the longest full-block match among 10,000 paths, verified token by token",
          "[kv_cache][prefix_cache]") {
  // 10,000 paths of 3 blocks each: a common first block, then one of 100
  // second blocks, then one of 100 third blocks.
  constexpr std::int32_t kPaths = 10000;
  KvCacheManager kv({.num_blocks = 3 * kPaths, .block_tokens = 4}, {});
  std::vector<kv::BlockId> freed;
  auto path_tokens = [](std::int32_t i) {
    return joined(joined(iota_tokens(4), {1000 + i / 100, 1, 2, 3}), {2000 + i % 100, 5, 6, 7});
  };
  for (std::int32_t i = 0; i < kPaths; ++i) cache(kv, std::uint64_t(i) + 1, path_tokens(i), i, "a", freed);
  CHECK(kv.stats().unnamed_paths == kPaths);
  // Path 4243 whole and two tokens more: it is taken over.
  auto whole = kv.find_prefix("a", joined(path_tokens(4242), {9, 9}), true, std::nullopt);
  REQUIRE(whole);
  CHECK(whole->path == ConversationId{4243});
  CHECK(whole->tokens == 12);
  // Diverging inside the third block: of the 100 paths with that second
  // block, path 4300 (i = 4299) shares two tokens of the third one too.
  auto inside = kv.find_prefix("a", joined(joined(iota_tokens(4), {1042, 1, 2, 3}), {2099, 5, 0, 0}), true,
                               std::nullopt);
  REQUIRE(inside);
  CHECK(inside->path == ConversationId{4300});
  CHECK(inside->tokens == 10);
  // A second block no path has: only the first block matches (9999 + 1 is the newest).
  auto first_only = kv.find_prefix("a", joined(iota_tokens(4), {1, 2, 3, 4, 5}), true, std::nullopt);
  REQUIRE(first_only);
  CHECK(first_only->tokens == 4);
  CHECK(first_only->path == ConversationId{10000});
  // Another namespace: nothing, whatever the tokens.
  CHECK_FALSE(kv.find_prefix("b", path_tokens(7), true, std::nullopt));
  // Forgotten paths leave the index: without path 4243, the paths of its
  // second block share 8 tokens; the most recently active is path 4300.
  kv.forget(ConversationId{4243}, freed);
  auto after = kv.find_prefix("a", joined(path_tokens(4242), {9, 9}), true, std::nullopt);
  REQUIRE(after);
  CHECK(after->path == ConversationId{4300});
  CHECK(after->tokens == 8);
  kv.forget_unnamed(freed);
  CHECK(kv.stats().unnamed_paths == 0);
  CHECK(kv.free_device_blocks() == 3 * kPaths);
  CHECK_FALSE(kv.find_prefix("a", path_tokens(1), true, std::nullopt));
}

TEST_CASE("conversations share the device blocks of another's cached prefix, freed when no path holds them",
          "[scheduler][prefix_cache]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 8},
                     {.num_blocks = 32, .block_tokens = 4});
  std::int64_t now = 0;
  const auto system = iota_tokens(12);  // three full blocks
  // Conversation 1's first turn computes the system prompt.
  REQUIRE(core.admit(conversation_turn(1, 1, joined(system, {500, 501}), "t", 2), now) == AdmitStatus::admitted);
  auto first = run_to_end(core, now);
  CHECK(cached_of(first, TurnId{1}) == 0);
  REQUIRE(core.cached_tokens(ConversationId{1}) == joined(system, {500, 501, 7}));
  const std::int32_t free_after_one = core.allocator().free_blocks();

  // Conversations 2 and 3 begin with it: each computes only its question.
  for (std::uint64_t c : {2, 3}) {
    const auto prompt = joined(system, {std::int32_t(600 + c), 601});
    REQUIRE(core.admit(conversation_turn(10 + c, c, prompt, "t", 2), now) == AdmitStatus::admitted);
    std::vector<TurnUpdate> events;
    auto plan = core.plan(++now, events);
    REQUIRE(plan.sequences.size() == 1);
    CHECK(plan.sequences[0].start_pos == 12);
    CHECK(cached_of(events, TurnId{10 + c}) == 12);
    CHECK(std::vector<kv::BlockId>(plan.sequences[0].blocks.begin(), plan.sequences[0].blocks.begin() + 3) ==
          std::vector<kv::BlockId>{kv::BlockId{0}, kv::BlockId{1}, kv::BlockId{2}});
    end_sampled(core, plan, now, events);
  }
  // One copy of the system prompt's three blocks, held by three paths.
  CHECK(core.stats().tiers.shared_device_blocks == 3);
  CHECK(core.allocator().ref_count(kv::BlockId{0}) == 3);
  CHECK(core.allocator().free_blocks() == free_after_one - 2);
  // Each conversation's own KV stays its own.
  CHECK(core.cached_tokens(ConversationId{2}) == joined(system, {602, 601}));
  CHECK(core.cached_tokens(ConversationId{3}) == joined(system, {603, 601}));
  // Another namespace computes it again.
  REQUIRE(core.admit(conversation_turn(20, 4, joined(system, {700}), "other", 1), now) == AdmitStatus::admitted);
  CHECK(cached_of(run_to_end(core, now), TurnId{20}) == 0);
  core.drop_conversation(ConversationId{4});
  // Dropping the conversation that computed it keeps the shared blocks for the others.
  core.drop_conversation(ConversationId{1});
  CHECK(core.allocator().ref_count(kv::BlockId{0}) == 2);
  CHECK(core.cached_tokens(ConversationId{2}) == joined(system, {602, 601}));
  core.drop_conversation(ConversationId{2});
  core.drop_conversation(ConversationId{3});
  CHECK(core.allocator().free_blocks() == 32);
  CHECK(core.stats().tiers.shared_device_blocks == 0);
}

TEST_CASE("a conversation with KV of its own attaches it and never takes over another's path",
          "[scheduler][prefix_cache]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 8},
                     {.num_blocks = 32, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(conversation_turn(1, 1, iota_tokens(9), "t", 2), now) == AdmitStatus::admitted);
  run_to_end(core, now);
  // Conversation 2 continues conversation 1's whole path: it shares the
  // full blocks, conversation 1 keeps its path.
  const auto longer = joined(joined(iota_tokens(9), {7}), {800, 801});
  REQUIRE(core.admit(conversation_turn(2, 2, longer, "t", 2), now) == AdmitStatus::admitted);
  CHECK(cached_of(run_to_end(core, now), TurnId{2}) == 8);
  CHECK(core.cached_tokens(ConversationId{1}) == joined(iota_tokens(9), {7}));
  // Conversation 2's next turn attaches its own KV (all of it).
  const auto next = joined(joined(longer, {7}), {900});
  REQUIRE(core.admit(conversation_turn(3, 2, next, "t", 1), now) == AdmitStatus::admitted);
  CHECK(cached_of(run_to_end(core, now), TurnId{3}) == std::int32_t(longer.size()) + 1);
  core.drop_conversation(ConversationId{1});
  core.drop_conversation(ConversationId{2});
  CHECK(core.allocator().free_blocks() == 32);
}

TEST_CASE("a pinned prefix stays where it is until its time or its unpin, evicted whole or chunk by chunk",
          "[kv_cache][prefix_cache]") {
  std::vector<kv::BlockId> freed;
  KvTransfers out;
  SECTION("device only: whole paths go") {
    KvCacheManager kv({.num_blocks = 8, .block_tokens = 4}, {});
    cache(kv, 1, iota_tokens(8), 1, "a", freed);       // blocks 0, 1: idle the longest
    cache(kv, 2, iota_tokens(8, 100), 2, "a", freed);  // blocks 2, 3
    REQUIRE(kv.pin(ConversationId{1}, 1000));
    CHECK(kv.stats().pinned_chunks == 2);
    CHECK(kv.reclaimable_device_blocks() == 2);
    // Path 2 goes although path 1 idled longer; then nothing is left to take.
    CHECK(kv.make_device_room(10, out, freed).step == DeviceRoom::Step::progress);
    CHECK_FALSE(kv.tokens(ConversationId{2}));
    CHECK(kv.tokens(ConversationId{1}) == iota_tokens(8));
    CHECK(kv.make_device_room(11, out, freed).step == DeviceRoom::Step::exhausted);
    // Its time has come: it goes like any other.
    CHECK(kv.make_device_room(1000, out, freed).step == DeviceRoom::Step::progress);
    CHECK_FALSE(kv.tokens(ConversationId{1}));
    CHECK(kv.free_device_blocks() == 8);
  }
  SECTION("device only: a path pinned in front loses only its unpinned tail") {
    // LRU: the tail (idle the longest) goes first whatever it would cost.
    KvCacheManager kv({.num_blocks = 8, .block_tokens = 4}, {.eviction_policy = EvictionPolicyKind::lru});
    cache(kv, 1, iota_tokens(12), 1, "a", freed);      // blocks 0, 1 pinned below; 2 its tail
    cache(kv, 2, iota_tokens(8, 100), 2, "a", freed);  // blocks 3, 4
    REQUIRE(kv.pin(ConversationId{1}, 1000, 8));
    CHECK(kv.pinned_blocks() == 2);
    // The tail goes, the pinned front stays.
    CHECK(kv.make_device_room(10, out, freed).step == DeviceRoom::Step::progress);
    CHECK(kv.tokens(ConversationId{1}) == iota_tokens(8));
    CHECK(kv.tokens(ConversationId{2}) == iota_tokens(8, 100));
    CHECK(kv.make_device_room(11, out, freed).step == DeviceRoom::Step::progress);
    CHECK_FALSE(kv.tokens(ConversationId{2}));
    CHECK(kv.make_device_room(12, out, freed).step == DeviceRoom::Step::exhausted);
    CHECK(kv.free_device_blocks() == 6);
    CHECK(kv.stats().pinned_chunks == 2);
    // Unpinned before its time (another namespace's unpin touches nothing), it goes too.
    CHECK(kv.unpin(std::string_view("b")) == 0);
    CHECK(kv.unpin(std::string_view("a")) == 2);
    CHECK(kv.pinned_blocks() == 0);
    CHECK(kv.make_device_room(13, out, freed).step == DeviceRoom::Step::progress);
    CHECK_FALSE(kv.tokens(ConversationId{1}));
    CHECK(kv.free_device_blocks() == 8);
  }
  SECTION("with a host tier: the pinned path's chunks are never copied out") {
    KvCacheManager kv({.num_blocks = 8, .block_tokens = 4, .host_slots = 4}, {});
    cache(kv, 1, iota_tokens(8), 1, "a", freed);
    cache(kv, 2, iota_tokens(8, 100), 2, "a", freed);
    REQUIRE(kv.pin(ConversationId{1}, 1000));
    for (int i = 0; i < 2; ++i) REQUIRE(kv.make_device_room(10 + i, out, freed).step == DeviceRoom::Step::progress);
    REQUIRE(out.swap_out.size() == 2);
    for (const DeviceHostCopy& c : out.swap_out) CHECK((c.device == kv::BlockId{2} || c.device == kv::BlockId{3}));
    CHECK(kv.make_device_room(12, out, freed).step != DeviceRoom::Step::progress);
  }
  SECTION("a path without a namespace has nothing to pin") {
    KvCacheManager kv({.num_blocks = 8, .block_tokens = 4}, {});
    cache(kv, 1, iota_tokens(8), 1, std::nullopt, freed);
    CHECK_FALSE(kv.pin(ConversationId{1}, 1000));
    CHECK_FALSE(kv.pin(ConversationId{9}, 1000));
  }
}

TEST_CASE("a turn with a pin time leaves its path pinned, and a later path with its prefix too",
          "[scheduler][prefix_cache]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 8},
                     {.num_blocks = 32, .block_tokens = 4});
  std::int64_t now = 0;
  TurnSpec pinned = stateless_turn(1, 100, iota_tokens(10), "t", 2);
  pinned.pin_ttl_ns = 1'000'000;
  REQUIRE(core.admit(std::move(pinned), now) == AdmitStatus::admitted);
  run_to_end(core, now);
  CHECK(core.stats().tiers.pinned_chunks == 2);  // its two full blocks
  // A conversation sharing them is pinned on those blocks too.
  REQUIRE(core.admit(conversation_turn(2, 2, joined(iota_tokens(8), {300, 301}), "t", 1), now) ==
          AdmitStatus::admitted);
  run_to_end(core, now);
  CHECK(core.stats().tiers.pinned_chunks == 4);
}

TEST_CASE("a new turn shares the blocks a running turn of its namespace has written, and only those",
          "[scheduler][prefix_cache]") {
  // A budget of 12 tokens: turn 1's 20-token prompt takes two iterations;
  // turn 2 (the same first 16 tokens) arrives after the first and is
  // admitted in the second, beside turn 1's last 8 tokens.
  const auto second_turn = [](const std::string& ns) {
    SchedulerCore core({.max_batch_tokens = 12, .max_running = 4, .max_admitted = 8},
                       {.num_blocks = 32, .block_tokens = 4});
    std::int64_t now = 0;
    std::vector<TurnUpdate> events;
    REQUIRE(core.admit(stateless_turn(1, 100, iota_tokens(20), "t", 2), now) == AdmitStatus::admitted);
    auto first = core.plan(++now, events);
    REQUIRE(first.sequences.size() == 1);
    CHECK(first.sequences[0].tokens.size() == 12);
    core.complete(first, finishing_samples(first), ++now, events);
    REQUIRE(core.admit(stateless_turn(2, 101, joined(iota_tokens(16), {900, 901}), ns, 1), now) ==
            AdmitStatus::admitted);
    auto second = core.plan(++now, events);
    REQUIRE(second.sequences.size() == 2);
    CHECK(second.sequences[0].turn == TurnId{1});
    CHECK(second.sequences[0].start_pos == 12);
    CHECK(second.sequences[1].turn == TurnId{2});
    const std::int32_t start = second.sequences[1].start_pos;
    std::int32_t cached = -1;
    for (const auto& e : events) {
      if (const auto* s = std::get_if<TurnStarted>(&e.event); s && e.turn == TurnId{2}) cached = s->cached_tokens;
    }
    core.complete(second, finishing_samples(second), ++now, events);
    (void)run_to_end(core, now);
    CHECK_FALSE(core.has_work());
    // Every reference it took is given back: clearing the cache frees every block.
    core.clear_unnamed_paths();
    CHECK(core.allocator().free_blocks() == 32);
    return std::pair{cached, start};
  };
  // Its namespace: the 12 tokens (3 blocks) turn 1's first iteration wrote.
  CHECK(second_turn("t") == std::pair{12, 12});
  // Another namespace: nothing.
  CHECK(second_turn("other") == std::pair{0, 0});
}

TEST_CASE("a turn never shares a running turn's blocks that this iteration is still writing",
          "[scheduler][prefix_cache]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 8},
                     {.num_blocks = 32, .block_tokens = 4});
  std::int64_t now = 0;
  std::vector<TurnUpdate> events;
  // Both arrive together: turn 1's whole prompt is fed in the same plan
  // that admits turn 2, so nothing of it is written yet.
  REQUIRE(core.admit(stateless_turn(1, 100, iota_tokens(24), "t", 2), now) == AdmitStatus::admitted);
  REQUIRE(core.admit(stateless_turn(2, 101, joined(iota_tokens(20), {900}), "t", 1), now) == AdmitStatus::admitted);
  auto plan = core.plan(++now, events);
  REQUIRE(plan.sequences.size() == 2);
  for (const auto& p : plan.sequences) CHECK(p.start_pos == 0);
  core.complete(plan, finishing_samples(plan), ++now, events);
  (void)run_to_end(core, now);
  core.clear_unnamed_paths();
  CHECK(core.allocator().free_blocks() == 32);
}
