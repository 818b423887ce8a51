// KvCacheIndex's eviction choices visit only the chunks that may still hold
// a copy (CachedEntry::live): over random caches, random tier changes,
// truncations, erasures and new entries, each pick equals a scan of every
// chunk of every entry, for both policies and every kind of predicate the
// cache manager asks.
#include "actors/kv_cache_index.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <optional>
#include <random>
#include <vector>

using namespace pensieve;
using namespace pensieve::actors;

namespace {

constexpr std::int32_t kBlockTokens = 16;

using ChunkPred = std::function<bool(const CachedChunk&)>;

// The choice as a scan of every chunk makes it.
std::optional<std::pair<ConversationId, std::size_t>> full_scan(const KvCacheIndex& index,
                                                                const EvictionPolicy& policy, std::int64_t now_ns,
                                                                const ChunkPred& pred, bool waiting) {
  std::optional<std::pair<ConversationId, std::size_t>> best;
  std::optional<ChunkCandidate> best_candidate;
  for (const auto& [conversation, e] : index.entries()) {
    if (e.attached.has_value() != waiting) continue;
    for (std::size_t i = 0; i < e.chunks.size(); ++i) {
      if (!pred(e.chunks[i]) || index.pinned(e, i)) continue;
      const ChunkCandidate c = index.candidate(conversation, e, i);
      if (!best_candidate || policy.leaves_before(c, *best_candidate, now_ns)) {
        best_candidate = c;
        best.emplace(conversation, i);
      }
    }
  }
  return best;
}

CachedChunk random_chunk(std::mt19937_64& rng, std::uint64_t id) {
  CachedChunk c;
  c.id = id;
  const auto bits = rng();
  if (bits & 1) c.device = kv::BlockId{std::uint32_t(rng() % 1000)};
  if (bits & 2) c.host = HostSlot{std::uint32_t(rng() % 1000)};
  if (bits & 4) c.disk = DiskSlot{std::uint32_t(rng() % 1000)};
  const ChunkMove moves[] = {ChunkMove::none, ChunkMove::none, ChunkMove::swap_out, ChunkMove::spill,
                             ChunkMove::restore};
  c.moving = moves[(bits >> 3) % 5];
  c.spill_failed = ((bits >> 6) & 7) == 0;
  return c;
}

CachedEntry random_entry(std::mt19937_64& rng, std::uint64_t& next_id) {
  CachedEntry e;
  e.tokens.resize(1 + rng() % 300);
  for (auto& t : e.tokens) t = std::int32_t(rng() % 50);
  const std::size_t chunks = (e.tokens.size() + kBlockTokens - 1) / kBlockTokens;
  for (std::size_t i = 0; i < chunks; ++i) e.chunks.push_back(random_chunk(rng, next_id++));
  e.last_active_ns = std::int64_t(rng() % 1'000'000);
  if (rng() % 4 == 0) e.attached = TurnId{rng() % 100 + 1};
  return e;
}

}  // namespace

TEST_CASE("the index's eviction picks over live chunks equal a scan of every chunk, for random caches",
          "[kv_cache][eviction]") {
  const std::vector<ChunkPred> preds = {
      [](const CachedChunk& c) { return c.device && !c.host && c.moving == ChunkMove::none; },
      [](const CachedChunk& c) { return c.device && c.host_valid() && c.moving == ChunkMove::none; },
      [](const CachedChunk& c) { return c.device && c.moving == ChunkMove::swap_out; },
      [](const CachedChunk& c) { return !c.device && c.host_valid() && c.disk_valid() && c.moving == ChunkMove::none; },
      [](const CachedChunk& c) { return !c.device && c.host_valid() && !c.disk && !c.spill_failed; },
      [](const CachedChunk& c) { return !c.device && !c.host && c.disk_valid() && c.moving == ChunkMove::none; },
  };
  const std::vector<EvictionPolicy> policies = {EvictionPolicy(EvictionPolicyKind::cost_aware),
                                                EvictionPolicy(EvictionPolicyKind::lru)};
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    std::mt19937_64 rng(seed);
    KvCacheIndex index(kBlockTokens);
    std::uint64_t next_id = 1, next_conversation = 1;
    for (int i = 0; i < 40; ++i) index.insert(ConversationId{next_conversation++}, random_entry(rng, next_id));
    std::size_t picks = 0, live_visits_saved = 0;
    for (int round = 0; round < 60; ++round) {
      // Tier changes: a chunk loses copies (sometimes all: it is dropped for
      // good) or, while it has one, gains another; moves start and end.
      for (auto& [conversation, e] : index.entries()) {
        for (CachedChunk& c : e.chunks) {
          const auto r = rng() % 16;
          if (r == 0) c.device.reset(), c.host.reset(), c.disk.reset(), c.moving = ChunkMove::none;
          else if (r == 1) c.device.reset();
          else if (r == 2) c.host.reset();
          else if (r == 3 && has_copy(c)) c.disk = DiskSlot{std::uint32_t(rng() % 1000)};
          else if (r == 4 && has_copy(c)) c.host = HostSlot{std::uint32_t(rng() % 1000)};
          else if (r == 5) c.moving = ChunkMove::none;
        }
        if (rng() % 8 == 0) e.last_active_ns += std::int64_t(rng() % 100'000);
      }
      // Entries truncated, erased, attached, detached and new.
      for (auto it = index.entries().begin(); it != index.entries().end();) {
        const auto r = rng() % 20;
        CachedEntry& e = it->second;
        if (r == 0) {
          it = index.erase(it);
          continue;
        }
        if (r == 1 && e.tokens.size() > 1) {
          const std::size_t keep = 1 + rng() % (e.tokens.size() - 1);
          e.chunks.resize((keep + kBlockTokens - 1) / kBlockTokens);
          index.truncate_tokens(it->first, e, keep);
        } else if (r == 2) {
          e.attached = e.attached ? std::nullopt : std::optional<TurnId>(TurnId{rng() % 100 + 1});
        }
        ++it;
      }
      for (int i = 0; i < 3; ++i) index.insert(ConversationId{next_conversation++}, random_entry(rng, next_id));
      const std::int64_t now_ns = 1'000'000 + std::int64_t(round) * 50'000;
      for (const EvictionPolicy& policy : policies) {
        for (const ChunkPred& pred : preds) {
          for (bool waiting : {false, true}) {
            const auto want = full_scan(index, policy, now_ns, pred, waiting);
            const auto got = index.coldest(policy, now_ns, pred, waiting);
            REQUIRE(want.has_value() == got.has_value());
            if (!got) continue;
            ++picks;
            CHECK(got->conversation == want->first);
            CHECK(got->index == want->second);
          }
        }
      }
      for (const auto& [conversation, e] : index.entries()) live_visits_saved += e.live.size() < e.chunks.size() ? 1 : 0;
    }
    CHECK(picks > 500);            // most questions had an answer
    CHECK(live_visits_saved > 0);  // and dropped chunks were left out of the scans
  }
}
