// KvCacheIndex's coldest-chunk walk (ColdOrder): it names the same chunk as
// a scan of every cached chunk, through random edits of entries and chunks,
// for both policies, with shared device blocks, pins and waiting turns; and
// it visits only the entries that can hold the answer.
#include "actors/kv_cache_index.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

using namespace pensieve;
using namespace pensieve::actors;

namespace {

constexpr std::int32_t bt = 4;

// A chunk in one of the states the manager gives chunks (not every code).
CachedChunk random_chunk(std::mt19937_64& rng, kv::BlockAllocator& device, std::uint64_t id) {
  CachedChunk c;
  c.id = id;
  switch (rng() % 7) {
    case 0: break;  // dropped
    case 1: c.device = device.allocate(); break;
    case 2: c.host = HostSlot{1}; break;
    case 3: c.host = HostSlot{1}, c.disk = DiskSlot{1}; break;
    case 4: c.disk = DiskSlot{1}; break;
    case 5:
      c.device = device.allocate();
      c.host = HostSlot{1};
      c.moving = rng() % 2 ? ChunkMove::swap_out : ChunkMove::none;
      c.evict_device = c.moving == ChunkMove::swap_out && rng() % 2;
      break;
    default:
      c.host = HostSlot{1};
      c.spill_failed = rng() % 2;
      c.moving = rng() % 3 == 0 ? ChunkMove::spill : ChunkMove::none;
      if (c.moving == ChunkMove::spill) c.disk = DiskSlot{1};
      break;
  }
  if (c.device && rng() % 3 == 0) device.retain(*c.device);  // another path shares it
  return c;
}

CachedEntry random_entry(std::mt19937_64& rng, kv::BlockAllocator& device, KvCacheIndex& index, std::int64_t now) {
  CachedEntry e;
  const std::size_t tokens = 1 + rng() % 23;
  for (std::size_t t = 0; t < tokens; ++t) e.tokens.push_back(std::int32_t(rng() % 5));
  const std::size_t chunks = (tokens + bt - 1) / bt;
  for (std::size_t i = 0; i < chunks; ++i) e.chunks.push_back(random_chunk(rng, device, index.next_chunk_id()));
  e.last_active_ns = now - std::int64_t(rng() % 50) * 1000;  // ties happen
  if (rng() % 4 == 0) e.attached = TurnId{rng() % 5};
  if (rng() % 3 == 0) e.shared = "ns";
  return e;
}

// The predicates the KvCacheManager asks with.
const std::vector<bool (*)(const CachedChunk&)> predicates = {
    [](const CachedChunk& c) { return !c.device && c.host_valid() && c.disk_valid() && c.moving == ChunkMove::none; },
    [](const CachedChunk& c) { return c.device && c.host_valid() && c.moving == ChunkMove::none; },
    [](const CachedChunk& c) { return !c.device && c.host_valid() && c.moving == ChunkMove::none; },
    [](const CachedChunk& c) {
      return !c.device && c.host_valid() && !c.disk && !c.spill_failed && c.moving == ChunkMove::none;
    },
    [](const CachedChunk& c) { return !c.device && !c.host && c.disk_valid() && c.moving == ChunkMove::none; },
    [](const CachedChunk& c) { return c.device && !c.evict_device && c.moving == ChunkMove::swap_out; },
    [](const CachedChunk& c) { return c.device && !c.evict_device && !c.host_valid(); },
    [](const CachedChunk& c) { return c.device && !c.host && c.moving == ChunkMove::none; },
    [](const CachedChunk& c) { return !c.device; },  // admits dropped chunks: the scan answers
};

bool same_pick(const std::optional<ChunkPick>& a, const std::optional<ChunkPick>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->conversation == b->conversation && a->index == b->index);
}

void check_against_scan(KvCacheIndex& index, const EvictionPolicy& policy, std::int64_t now, std::mt19937_64& rng) {
  const std::optional<ConversationId> spare = ConversationId{1 + rng() % 40};
  const auto not_spare = [&](ConversationId c, const CachedEntry&) { return c != spare; };
  for (bool waiting : {false, true}) {
    for (std::size_t p = 0; p < predicates.size(); ++p) {
      const auto walked = index.coldest_where(policy, now, waiting, not_spare, predicates[p]);
      const auto scanned = index.coldest_scan(policy, now, waiting, not_spare, predicates[p]);
      INFO("predicate " << p << ", waiting " << waiting);
      REQUIRE(same_pick(walked, scanned));
      std::int64_t n = 0;
      for (const auto& [conversation, e] : index.entries()) {
        if (e.attached.has_value() != waiting) continue;
        for (const CachedChunk& c : e.chunks) n += predicates[p](c) ? 1 : 0;
      }
      REQUIRE(index.count_where(waiting, predicates[p]) == n);
    }
  }
}

void random_run(EvictionPolicy policy, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  kv::BlockAllocator device(4096);
  KvCacheIndex index(bt, &device);
  std::int64_t now = 1'000'000;
  for (int step = 0; step < 600; ++step) {
    now += std::int64_t(rng() % 3) * 1000;
    const ConversationId id{1 + rng() % 40};
    switch (rng() % 6) {
      case 0:  // a new or replaced entry
        index.erase(id);
        index.insert(id, random_entry(rng, device, index, now));
        break;
      case 1: index.erase(id); break;
      case 2:  // a chunk changes tier, or its entry is used or attached
        if (CachedEntry* e = index.find(id)) {
          if (!e->chunks.empty()) {
            CachedChunk& c = e->chunks[rng() % e->chunks.size()];
            const std::uint64_t keep = c.id;
            c = random_chunk(rng, device, keep);
          }
          if (rng() % 3 == 0) e->last_active_ns = now;
          if (rng() % 4 == 0) e->attached = e->attached ? std::nullopt : std::optional(TurnId{1});
        }
        break;
      case 3:  // a returning turn keeps a shorter history
        if (CachedEntry* e = index.find(id)) {
          const std::size_t keep = rng() % (e->tokens.size() + 1);
          while (e->chunks.size() > (keep + bt - 1) / bt) e->chunks.pop_back();
          index.truncate_tokens(id, *e, keep);
        }
        break;
      case 4:  // a picked chunk edited after another query, then touched
        if (auto p = index.coldest(policy, now, predicates[rng() % 8])) {
          index.coldest(policy, now, predicates[2], true);
          p->chunk() = CachedChunk{p->chunk().id};
          index.touch(*p->entry);
        }
        break;
      default:  // pins come and go
        if (const CachedEntry* e = std::as_const(index).find(id); e && !e->chain.empty()) {
          index.pin(*e, now + 5000, 1 + rng() % e->chain.size());
        }
        index.expire_pins(now);
        break;
    }
    check_against_scan(index, policy, now, rng);
  }
}

}  // namespace

TEST_CASE("the coldest-chunk walk picks the chunk a full scan picks, cost-aware, through random edits",
          "[kv][cold]") {
  for (std::uint64_t seed : {1, 2, 3, 4}) random_run(EvictionPolicy(EvictionPolicyKind::cost_aware), seed);
}

TEST_CASE("the coldest-chunk walk picks the chunk a full scan picks, LRU, through random edits", "[kv][cold]") {
  for (std::uint64_t seed : {5, 6}) random_run(EvictionPolicy(EvictionPolicyKind::lru), seed);
}

TEST_CASE("the coldest-chunk walk picks what the scan picks when attention dominates the cost", "[kv][cold]") {
  // Long ranges cost far more than short ones: the floors of short last
  // chunks and of long entries differ most.
  random_run(EvictionPolicy(EvictionPolicyKind::cost_aware, CostModel{0.0, 1.0}), 7);
}

TEST_CASE("the coldest-chunk walk visits the entries that can hold the answer, not all of them", "[kv][cold]") {
  kv::BlockAllocator device(8);
  KvCacheIndex index(bt, &device);
  const EvictionPolicy policy(EvictionPolicyKind::cost_aware);
  // 1,000 idle entries of four full chunks on the host, the oldest first.
  for (std::uint64_t i = 1; i <= 1000; ++i) {
    CachedEntry e;
    e.tokens.assign(4 * bt, 7);
    for (int c = 0; c < 4; ++c) {
      CachedChunk chunk;
      chunk.id = index.next_chunk_id();
      chunk.host = HostSlot{1};
      e.chunks.push_back(chunk);
    }
    e.last_active_ns = std::int64_t(i) * 1'000'000;
    index.insert(ConversationId{i}, std::move(e));
  }
  const std::int64_t now = 2'000'000'000;
  const auto host = [](const CachedChunk& c) { return c.host_valid(); };
  const auto pick = index.coldest(policy, now, host);
  REQUIRE(pick);
  CHECK(pick->conversation == ConversationId{1});
  CHECK(pick->index == 0);
  // Same-sized chunks: every later entry's floor is above the oldest one's
  // first chunk, so the walk ends after the oldest entry.
  CHECK(index.last_walk_visits() == 1);
  // No device chunk anywhere: answered without a walk.
  CHECK_FALSE(index.coldest(policy, now, [](const CachedChunk& c) { return c.device.has_value(); }));
  CHECK(index.last_walk_visits() == 0);
}
