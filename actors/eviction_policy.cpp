#include "actors/eviction_policy.hpp"

#include <algorithm>
#include <limits>
#include <tuple>

namespace pensieve::actors {

double CostModel::range_cost(std::int64_t begin, std::int64_t end) const {
  if (end <= begin) return 0.0;
  // Sum over p in [begin, end) of (p + 1) keys attended.
  const double b = double(begin), e = double(end);
  const double pairs = (e * (e + 1.0) - b * (b + 1.0)) / 2.0;
  return per_token * (e - b) + per_token_pair * pairs;
}

std::optional<CostModel> CostModel::fit(std::span<const PrefillSample> samples) {
  // Model: seconds = a * n + b * n (n + 1) / 2. Normal equations of the
  // two-column least squares problem.
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  std::optional<std::int64_t> first_len;
  bool distinct = false, positive = false;
  for (const PrefillSample& s : samples) {
    if (s.tokens <= 0) continue;
    const double x1 = double(s.tokens), x2 = double(s.tokens) * double(s.tokens + 1) / 2.0;
    s11 += x1 * x1;
    s12 += x1 * x2;
    s22 += x2 * x2;
    r1 += x1 * s.seconds;
    r2 += x2 * s.seconds;
    if (!first_len) first_len = s.tokens;
    distinct = distinct || s.tokens != *first_len;
    positive = positive || s.seconds > 0.0;
  }
  if (!distinct || !positive) return std::nullopt;
  const double det = s11 * s22 - s12 * s12;
  if (det <= 0.0) return std::nullopt;
  CostModel m;
  m.per_token = (r1 * s22 - r2 * s12) / det;
  m.per_token_pair = (r2 * s11 - r1 * s12) / det;
  // A negative coefficient is noise: refit with the other alone.
  if (m.per_token < 0.0) {
    m.per_token = 0.0;
    m.per_token_pair = r2 / s22;
  } else if (m.per_token_pair < 0.0) {
    m.per_token_pair = 0.0;
    m.per_token = r1 / s11;
  }
  if (m.per_token <= 0.0 && m.per_token_pair <= 0.0) return std::nullopt;
  return m;
}

double EvictionPolicy::retention_value(const ChunkCandidate& c, std::int64_t now_ns) const {
  if (kind_ == EvictionPolicyKind::lru) return double(c.last_active_ns);
  const double idle_ns = double(std::max<std::int64_t>(1, now_ns - c.last_active_ns));
  return cost_.range_cost(c.begin_token, c.end_token) * double(std::max(1, c.sharers)) / idle_ns;
}

double EvictionPolicy::cost_floor(std::int64_t tokens) const {
  if (!(cost_.per_token >= 0.0 && cost_.per_token_pair >= 0.0)) return -std::numeric_limits<double>::infinity();
  // A range's cost grows with its length and with where it starts (every
  // token attends over more keys), so [0, tokens) is the cheapest.
  return cost_.range_cost(0, tokens) * (1.0 - 1e-9);
}

double EvictionPolicy::value_floor(std::int64_t begin_token, std::int64_t end_token, std::int64_t last_active_ns,
                                   std::int64_t now_ns) const {
  if (kind_ == EvictionPolicyKind::lru) return double(last_active_ns);
  if (!(cost_.per_token >= 0.0 && cost_.per_token_pair >= 0.0)) return -std::numeric_limits<double>::infinity();
  // The same idle time as retention_value(), one sharer, and the cost a
  // hair lower so no rounding puts the floor above the value.
  const double idle_ns = double(std::max<std::int64_t>(1, now_ns - last_active_ns));
  return cost_.range_cost(begin_token, end_token) * (1.0 - 1e-9) / idle_ns;
}

bool EvictionPolicy::leaves_before(const ChunkCandidate& a, const ChunkCandidate& b, std::int64_t now_ns) const {
  if (kind_ == EvictionPolicyKind::lru) {
    return std::tie(a.last_active_ns, a.begin_token, a.conversation, a.index) <
           std::tie(b.last_active_ns, b.begin_token, b.conversation, b.index);
  }
  const double va = retention_value(a, now_ns), vb = retention_value(b, now_ns);
  if (va != vb) return va < vb;
  return std::tie(a.begin_token, a.conversation, a.index) < std::tie(b.begin_token, b.conversation, b.index);
}

std::vector<std::size_t> EvictionPolicy::order(std::span<const ChunkCandidate> candidates,
                                               std::int64_t now_ns) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i].active) out.push_back(i);
  }
  std::sort(out.begin(), out.end(), [&](std::size_t a, std::size_t b) {
    return leaves_before(candidates[a], candidates[b], now_ns);
  });
  return out;
}

std::optional<std::size_t> EvictionPolicy::first(std::span<const ChunkCandidate> candidates,
                                                 std::int64_t now_ns) const {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].active) continue;
    if (!best || leaves_before(candidates[i], candidates[*best], now_ns)) best = i;
  }
  return best;
}

}  // namespace pensieve::actors
