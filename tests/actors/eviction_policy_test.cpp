// EvictionPolicy and CostModel: which chunk leaves first under each policy,
// that a running conversation's chunks never do, and the recompute cost.
#include "actors/eviction_policy.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace pensieve::actors;

namespace {

ChunkCandidate chunk(std::uint64_t conversation, std::int32_t index, std::int64_t last_active_ns,
                     std::int32_t block_tokens = 32, std::int64_t end_token = -1) {
  const std::int64_t begin = std::int64_t(index) * block_tokens;
  return {ConversationId{conversation}, index, begin, end_token < 0 ? begin + block_tokens : end_token,
          last_active_ns, false};
}

}  // namespace

TEST_CASE("recompute cost grows with a chunk's position and matches the per-token sums", "[eviction]") {
  const CostModel m{2.0, 0.5};
  // Tokens at positions 0..3 attend over 1..4 keys: 4 * 2 + (1+2+3+4) * 0.5.
  CHECK(m.range_cost(0, 4) == 13.0);
  // Positions 4..7: 4 * 2 + (5+6+7+8) * 0.5.
  CHECK(m.range_cost(4, 8) == 21.0);
  CHECK(m.range_cost(0, 8) == m.range_cost(0, 4) + m.range_cost(4, 8));
  CHECK(m.range_cost(5, 5) == 0.0);
  const CostModel d;
  double last = 0.0;
  for (std::int64_t j = 0; j < 64; ++j) {
    const double c = d.range_cost(j * 32, (j + 1) * 32);
    CHECK(c > last);
    last = c;
  }
}

TEST_CASE("a cost model fitted to measured prefills reproduces them", "[eviction]") {
  const CostModel truth{3e-5, 2e-8};
  std::vector<PrefillSample> samples;
  for (std::int64_t n : {64, 256, 1024, 2048}) samples.push_back({n, truth.range_cost(0, n)});
  auto fit = CostModel::fit(samples);
  REQUIRE(fit);
  CHECK(fit->per_token == Approx(truth.per_token).epsilon(1e-6));
  CHECK(fit->per_token_pair == Approx(truth.per_token_pair).epsilon(1e-6));
  // One length cannot separate the two terms; nothing measured cannot either.
  const PrefillSample one[] = {{128, 0.01}, {128, 0.011}};
  CHECK_FALSE(CostModel::fit(one));
  CHECK_FALSE(CostModel::fit({}));
}

TEST_CASE("cost-aware eviction weighs a chunk's recompute cost against its idle time", "[eviction]") {
  // Attention-heavy costs: 4-token chunks cost 14, 30 and 46 at positions 0, 4, 8.
  const EvictionPolicy p(EvictionPolicyKind::cost_aware, CostModel{1.0, 1.0});
  REQUIRE(p.cost().range_cost(0, 4) == 14.0);
  REQUIRE(p.cost().range_cost(4, 8) == 30.0);
  // Conversation 1 idle for 1000 ns (3 chunks), conversation 2 for 500 ns (2).
  const std::vector<ChunkCandidate> c{chunk(1, 0, 0, 4), chunk(1, 1, 0, 4), chunk(1, 2, 0, 4),
                                      chunk(2, 0, 500, 4), chunk(2, 1, 500, 4)};
  // Values: 0.014, 0.030, 0.046 and 0.028, 0.060.
  CHECK(p.order(c, 1000) == std::vector<std::size_t>{0, 3, 1, 2, 4});
  CHECK(p.first(c, 1000) == std::size_t(0));
  CHECK(p.retention_value(c[1], 1000) == Approx(0.030));
}

TEST_CASE("cost-aware eviction takes a cheap, partly filled last chunk before full leading ones", "[eviction]") {
  const EvictionPolicy p;  // defaults
  // 33 tokens: a full chunk [0, 32) and one token at position 32.
  const std::vector<ChunkCandidate> c{chunk(1, 0, 0), chunk(1, 1, 0, 32, 33)};
  CHECK(p.order(c, 100) == std::vector<std::size_t>{1, 0});
}

TEST_CASE("lru eviction takes the least recently active conversation first, leading chunks first", "[eviction]") {
  const EvictionPolicy p(EvictionPolicyKind::lru);
  const std::vector<ChunkCandidate> c{chunk(2, 1, 500), chunk(1, 2, 0), chunk(2, 0, 500), chunk(1, 0, 0),
                                      chunk(1, 1, 0)};
  CHECK(p.order(c, 1000) == std::vector<std::size_t>{3, 4, 1, 2, 0});
  CHECK(p.first(c, 1000) == std::size_t(3));
  // The same candidates under cost-aware with the same costs per position:
  // lru ignores how expensive the old conversation's last chunk is.
  const EvictionPolicy cost(EvictionPolicyKind::cost_aware, CostModel{1.0, 1.0});
  CHECK(cost.order(c, 1000) == std::vector<std::size_t>{3, 2, 4, 1, 0});
}

TEST_CASE("chunks of a running or attached conversation are never chosen, under either policy", "[eviction]") {
  for (auto kind : {EvictionPolicyKind::lru, EvictionPolicyKind::cost_aware}) {
    const EvictionPolicy p(kind);
    std::vector<ChunkCandidate> c{chunk(1, 0, 0), chunk(1, 1, 0), chunk(2, 0, 900), chunk(2, 1, 900)};
    c[0].active = c[1].active = true;  // the oldest, cheapest: would go first
    CHECK(p.order(c, 1000) == std::vector<std::size_t>{2, 3});
    CHECK(p.first(c, 1000) == std::size_t(2));
    c[2].active = c[3].active = true;
    CHECK(p.order(c, 1000).empty());
    CHECK_FALSE(p.first(c, 1000));
  }
}

TEST_CASE("cost-aware eviction keeps a chunk shared by many paths longer, by its cost times its sharers",
          "[eviction]") {
  const EvictionPolicy p(EvictionPolicyKind::cost_aware, CostModel{1.0, 1.0});
  // Two leading chunks, idle as long: alone, the cheaper one (conversation
  // 1's, position 0) leaves first; shared by 3, it is worth 3 x 14 = 42
  // against conversation 2's later chunk at 30.
  ChunkCandidate system = chunk(1, 0, 0, 4);
  const ChunkCandidate later = chunk(2, 1, 0, 4);
  CHECK(p.leaves_before(system, later, 1000));
  system.sharers = 3;
  CHECK(p.retention_value(system, 1000) == Approx(3 * 0.014));
  CHECK(p.leaves_before(later, system, 1000));
  // lru ignores sharers: the least recently active still leaves first.
  const EvictionPolicy lru(EvictionPolicyKind::lru);
  CHECK(lru.leaves_before(system, chunk(2, 1, 10, 4), 1000));
}
