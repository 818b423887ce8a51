// Each sampling filter on hand-made logits, checked against the distribution
// computed by hand.
#include "gpu/model/sampler.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>
#include <vector>

namespace pm = pensieve::model;

namespace {

pm::Sampler make_sampler(pm::SamplingParams params, std::int32_t vocab,
                         std::vector<std::int32_t> prompt = {}, std::vector<std::int32_t> eos = {}) {
  return pm::Sampler(std::move(params), pm::VocabInfo{vocab, std::move(eos)}, prompt);
}

// Logits whose softmax is exactly `probs` (up to rounding).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::set<std::int32_t> tokens_drawn(pm::Sampler& s, const std::vector<float>& logits, int draws) {
  std::set<std::int32_t> seen;
  for (int i = 0; i < draws; ++i) seen.insert(s.sample(logits).token);
  return seen;
}

void require_distribution(const std::vector<pm::TokenProbability>& got,
                          const std::vector<std::pair<std::int32_t, double>>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].token == want[i].first);
    CHECK(got[i].probability == Approx(want[i].second).epsilon(1e-6));
  }
}

}  // namespace

TEST_CASE("greedy picks the largest logit and the lowest id on a tie", "[sampler]") {
  pm::SamplingParams p;
  p.temperature = 0.0f;
  auto s = make_sampler(p, 5);
  const std::vector<float> logits{1.0f, 3.0f, -2.0f, 3.0f, 2.9f};
  CHECK(s.sample(logits).token == 1);
  require_distribution(s.distribution(logits), {{1, 1.0}});
}

TEST_CASE("a temperature below 1e-5 is greedy rather than dividing by almost zero",
          "[sampler]") {
  pm::SamplingParams p;
  p.temperature = 1e-30f;
  auto s = make_sampler(p, 3);
  const std::vector<float> logits{1.0f, 30.0f, 30.0f};
  require_distribution(s.distribution(logits), {{1, 1.0}});
  CHECK(s.sample(logits).token == 1);
}

TEST_CASE("temperature divides the logits before the softmax", "[sampler]") {
  pm::SamplingParams p;
  p.temperature = 0.5f;
  auto s = make_sampler(p, 3);
  const std::vector<float> logits{1.0f, 0.0f, -1.0f};
  const double z = std::exp(2.0) + 1.0 + std::exp(-2.0);
  require_distribution(s.distribution(logits),
                       {{0, std::exp(2.0) / z}, {1, 1.0 / z}, {2, std::exp(-2.0) / z}});
}

TEST_CASE("top-k 2 keeps the two most likely tokens, renormalised, and never draws the third",
          "[sampler]") {
  pm::SamplingParams p;
  p.top_k = 2;
  p.seed = 3;
  auto s = make_sampler(p, 4);
  const auto logits = logits_of({0.3, 0.1, 0.35, 0.25});
  const auto dist = s.distribution(logits);
  REQUIRE(dist.size() == 2);
  std::map<std::int32_t, double> by_token{{dist[0].token, dist[0].probability},
                                          {dist[1].token, dist[1].probability}};
  CHECK(by_token.at(2) == Approx(0.35 / 0.65).epsilon(1e-6));
  CHECK(by_token.at(0) == Approx(0.30 / 0.65).epsilon(1e-6));
  CHECK(tokens_drawn(s, logits, 5000) == std::set<std::int32_t>{0, 2});
}

TEST_CASE("top-k breaks a tie at the cut by keeping the lower id", "[sampler]") {
  pm::SamplingParams p;
  p.top_k = 2;
  auto s = make_sampler(p, 4);
  const std::vector<float> logits{0.5f, 1.0f, 0.5f, 0.5f};
  const auto dist = s.distribution(logits);
  REQUIRE(dist.size() == 2);
  std::set<std::int32_t> kept{dist[0].token, dist[1].token};
  CHECK(kept == std::set<std::int32_t>{0, 1});
}

TEST_CASE("top-p keeps a token while the mass ahead of it is below top_p", "[sampler]") {
  pm::SamplingParams p;
  p.seed = 11;
  const auto logits = logits_of({0.15, 0.5, 0.05, 0.3});
  SECTION("0.75 keeps the two tokens holding 0.5 and 0.3") {
    p.top_p = 0.75f;
    auto s = make_sampler(p, 4);
    require_distribution(s.distribution(logits), {{1, 0.5 / 0.8}, {3, 0.3 / 0.8}});
    CHECK(tokens_drawn(s, logits, 5000) == std::set<std::int32_t>{1, 3});
  }
  SECTION("0.9 adds the third and still excludes the tail") {
    p.top_p = 0.9f;
    auto s = make_sampler(p, 4);
    require_distribution(s.distribution(logits),
                         {{1, 0.5 / 0.95}, {3, 0.3 / 0.95}, {0, 0.15 / 0.95}});
    CHECK(tokens_drawn(s, logits, 5000) == std::set<std::int32_t>{0, 1, 3});
  }
  SECTION("a tiny top_p still keeps the most likely token") {
    p.top_p = 0.01f;
    auto s = make_sampler(p, 4);
    require_distribution(s.distribution(logits), {{1, 1.0}});
  }
}

TEST_CASE("top-p applies to the distribution top-k left, renormalised", "[sampler]") {
  pm::SamplingParams p;
  p.top_k = 2;      // keeps 0.5 and 0.3: renormalised 0.625 and 0.375
  p.top_p = 0.6f;   // 0.625 alone reaches 0.6
  auto s = make_sampler(p, 4);
  require_distribution(s.distribution(logits_of({0.15, 0.5, 0.05, 0.3})), {{1, 1.0}});
}

TEST_CASE("min-p drops tokens below min_p times the top probability", "[sampler]") {
  pm::SamplingParams p;
  const auto logits = logits_of({0.15, 0.5, 0.05, 0.3});
  SECTION("0.2: the threshold 0.1 drops only the 0.05 token") {
    p.min_p = 0.2f;
    auto s = make_sampler(p, 4);
    const auto dist = s.distribution(logits);
    std::map<std::int32_t, double> by_token;
    for (const auto& t : dist) by_token[t.token] = t.probability;
    REQUIRE(by_token.size() == 3);
    CHECK(by_token.at(0) == Approx(0.15 / 0.95).epsilon(1e-6));
    CHECK(by_token.at(1) == Approx(0.50 / 0.95).epsilon(1e-6));
    CHECK(by_token.at(3) == Approx(0.30 / 0.95).epsilon(1e-6));
    CHECK(tokens_drawn(s, logits, 5000) == std::set<std::int32_t>{0, 1, 3});
  }
  SECTION("0.5: the threshold 0.25 keeps 0.5 and 0.3") {
    p.min_p = 0.5f;
    auto s = make_sampler(p, 4);
    const auto dist = s.distribution(logits);
    std::set<std::int32_t> kept;
    for (const auto& t : dist) kept.insert(t.token);
    CHECK(kept == std::set<std::int32_t>{1, 3});
  }
}

TEST_CASE("min-p compares after temperature", "[sampler]") {
  // At temperature 0.5 the weights are p^2: 0.25, 0.09, 0.0225. min_p 0.2 sets
  // the bar at 0.2 * 0.25 = 0.05, which 0.0225 misses (although 0.15 >= 0.2 * 0.5
  // at temperature 1); the two left are renormalised over 0.34.
  pm::SamplingParams p;
  p.temperature = 0.5f;
  p.min_p = 0.2f;
  auto s = make_sampler(p, 3);
  require_distribution(s.distribution(logits_of({0.5, 0.3, 0.15})),
                       {{0, 0.25 / 0.34}, {1, 0.09 / 0.34}});
}
