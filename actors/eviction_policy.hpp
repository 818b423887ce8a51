#pragma once
// EvictionPolicy: which cached KV chunk leaves a tier first. Pure (no
// threads, no I/O); the tier cache asks it, on the scheduler's thread.
//
// Two policies, so the benchmark can compare them:
// - cost_aware (Pensieve): a chunk's retention value is the cost to
//   recompute it (a later chunk attends over more context, so it costs more)
//   divided by the time since its conversation was last active, times the
//   paths and turns sharing it (a system prompt 100 conversations share is
//   worth 100 recomputes). The lowest value leaves first: idle
//   conversations lose their cheap leading chunks (or a cheap, partly
//   filled last chunk) before their expensive ones.
// - lru: the chunk of the least recently active conversation leaves first,
//   leading chunks before later ones.
// Chunks of a running conversation are never candidates; the tier cache
// offers those of a waiting turn (`active`) only when no idle one is left.
#include "actors/ids.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace pensieve::actors {

enum class EvictionPolicyKind : std::uint8_t { lru, cost_aware };

// One measured prefill from position 0: `tokens` tokens took `seconds`.
struct PrefillSample {
  std::int64_t tokens = 0;
  double seconds = 0.0;
};

// Relative cost of recomputing tokens: the linear layers cost the same per
// token, attention grows with each token's context (a token at position p
// attends over p + 1 keys). The defaults put the two at par near a 2k
// context, close enough to rank chunks; fit() calibrates them from measured
// prefills (then the unit is seconds).
struct CostModel {
  double per_token = 1.0;
  double per_token_pair = 1.0 / 1024.0;

  // Cost of computing tokens [begin, end) when [0, begin) is already cached.
  double range_cost(std::int64_t begin, std::int64_t end) const;

  // Least-squares fit of both coefficients (kept non-negative) to prefills
  // of different lengths; nullopt when the samples cannot determine them
  // (fewer than two distinct lengths, or no positive time).
  static std::optional<CostModel> fit(std::span<const PrefillSample> samples);
};

// A chunk as the policy sees it.
struct ChunkCandidate {
  ConversationId conversation;
  std::int32_t index = 0;          // the chunk's place in its conversation
  std::int64_t begin_token = 0;    // the positions it covers: [begin_token, end_token)
  std::int64_t end_token = 0;
  std::int64_t last_active_ns = 0; // when its conversation was last active
  bool active = false;             // running or attached: never leaves
  std::int32_t sharers = 1;        // paths and turns holding its device block (1 off the device)
};

class EvictionPolicy {
 public:
  explicit EvictionPolicy(EvictionPolicyKind kind = EvictionPolicyKind::cost_aware, CostModel cost = {})
      : kind_(kind), cost_(cost) {}

  EvictionPolicyKind kind() const { return kind_; }
  const CostModel& cost() const { return cost_; }

  // Cost-aware retention value (recompute cost per nanosecond idle); lru:
  // the last-active time. Either way, lower leaves first.
  double retention_value(const ChunkCandidate& c, std::int64_t now_ns) const;

  // At most the recompute cost (CostModel::range_cost) of any range of
  // `tokens` tokens or more, wherever it starts: a floor on the value of a
  // chunk that size for ColdOrder's walk, kept a hair below the exact cost
  // so rounding never puts it above (minus infinity when a coefficient is
  // negative: then no floor holds).
  double cost_floor(std::int64_t tokens) const;

  // At most retention_value() of a chunk covering [begin_token, end_token)
  // last active at `last_active_ns`, whatever its sharers: without asking
  // who shares it, rules a chunk out. Cost-aware, it grows with begin_token
  // for ranges of one length (LRU: the value itself).
  double value_floor(std::int64_t begin_token, std::int64_t end_token, std::int64_t last_active_ns,
                     std::int64_t now_ns) const;

  // True when `a` leaves before `b` (ties: leading chunks first, then the
  // lower conversation id, so the order is total and deterministic).
  bool leaves_before(const ChunkCandidate& a, const ChunkCandidate& b, std::int64_t now_ns) const;

  // The candidates that may leave (active ones excluded), in leaving order,
  // as indices into `candidates`.
  std::vector<std::size_t> order(std::span<const ChunkCandidate> candidates, std::int64_t now_ns) const;

  // The first of order(), without sorting.
  std::optional<std::size_t> first(std::span<const ChunkCandidate> candidates, std::int64_t now_ns) const;

 private:
  EvictionPolicyKind kind_;
  CostModel cost_;
};

}  // namespace pensieve::actors
