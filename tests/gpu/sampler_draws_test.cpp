// Where the randomness comes from: per-request seeds, the inverse-CDF draw,
// and the drawn frequencies against the softmax.
#include "gpu/model/sampler.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

namespace pm = pensieve::model;

namespace {

std::vector<float> pseudo_random_logits(std::uint32_t seed, std::int32_t vocab) {
  std::mt19937 gen(seed);
  std::vector<float> out;
  for (std::int32_t i = 0; i < vocab; ++i)
    out.push_back(static_cast<float>(gen() % 1000) / 250.0f - 2.0f);
  return out;
}

pm::Sampler seeded(std::uint64_t seed, std::int32_t vocab) {
  pm::SamplingParams p;
  p.seed = seed;
  p.top_k = 50;
  p.top_p = 0.9f;
  return pm::Sampler(p, pm::VocabInfo{vocab, {}}, std::vector<std::int32_t>{});
}

}  // namespace

TEST_CASE("the same seed and logits give the same tokens", "[sampler]") {
  auto a = seeded(1234, 300);
  auto b = seeded(1234, 300);
  auto c = seeded(1235, 300);
  std::vector<std::int32_t> ta, tb, tc;
  for (std::uint32_t step = 0; step < 200; ++step) {
    const auto logits = pseudo_random_logits(step, 300);
    ta.push_back(a.sample(logits).token);
    tb.push_back(b.sample(logits).token);
    tc.push_back(c.sample(logits).token);
  }
  CHECK(ta == tb);
  CHECK(ta != tc);
}

TEST_CASE("a request's tokens do not depend on other requests sampled in between", "[sampler]") {
  auto alone = seeded(99, 300);
  auto interleaved = seeded(99, 300);
  auto other = seeded(99, 300);  // same seed, different logits: still independent
  for (std::uint32_t step = 0; step < 100; ++step) {
    const auto logits = pseudo_random_logits(step, 300);
    other.sample(pseudo_random_logits(step + 1000, 300));
    other.sample(pseudo_random_logits(step + 2000, 300));
    CHECK(alone.sample(logits).token == interleaved.sample(logits).token);
  }
}

TEST_CASE("a draw is the inverse CDF at mt19937_64's next 53-bit uniform", "[sampler]") {
  // Pins the draw to the standard-specified generator so results do not change
  // with the standard library.
  pm::SamplingParams p;
  p.seed = 42;
  pm::Sampler s(p, pm::VocabInfo{6, {}}, std::vector<std::int32_t>{});
  std::mt19937_64 reference(42);
  const std::vector<float> logits{0.1f, -0.3f, 1.2f, 0.0f, 0.7f, -2.0f};
  for (int i = 0; i < 500; ++i) {
    const auto dist = s.distribution(logits);
    const double u = static_cast<double>(reference() >> 11) * 0x1.0p-53;
    double cumulative = 0.0;
    std::int32_t expected = dist.back().token;
    for (const auto& t : dist) {
      cumulative += t.probability;
      if (u < cumulative) {
        expected = t.token;
        break;
      }
    }
    REQUIRE(s.sample(logits).token == expected);
  }
}

TEST_CASE("20k draws at temperature 1 follow the softmax (chi-square, fixed seed)", "[sampler]") {
  const std::vector<float> logits{0.0f, 0.5f, 1.0f, -0.5f, 1.5f, 0.2f, -1.0f, 0.8f, 0.3f, -0.2f};
  pm::SamplingParams p;
  p.seed = 2026;
  pm::Sampler s(p, pm::VocabInfo{10, {}}, std::vector<std::int32_t>{});
  constexpr int draws = 20000;
  std::vector<int> counts(10, 0);
  for (int i = 0; i < draws; ++i) ++counts[static_cast<std::size_t>(s.sample(logits).token)];
  double z = 0.0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  double chi_square = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const double expected = draws * std::exp(static_cast<double>(logits[i])) / z;
    chi_square += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  // 9 degrees of freedom: P(chi2 > 27.88) = 0.001.
  CHECK(chi_square < 27.88);
}

TEST_CASE("20k draws with top-k and min-p follow the renormalised distribution", "[sampler]") {
  const std::vector<float> logits{0.0f, 0.5f, 1.0f, -0.5f, 1.5f, 0.2f, -1.0f, 0.8f, 0.3f, -3.0f};
  pm::SamplingParams p;
  p.seed = 7;
  p.top_k = 8;     // drops tokens 6 and 9
  p.min_p = 0.2f;  // drops p < 0.2 * e^1.5: tokens with logit < 1.5 + ln 0.2 = -0.109
  pm::Sampler s(p, pm::VocabInfo{10, {}}, std::vector<std::int32_t>{});
  const std::vector<std::size_t> kept{0, 1, 2, 4, 5, 7, 8};
  double z = 0.0;
  for (std::size_t i : kept) z += std::exp(static_cast<double>(logits[i]));
  constexpr int draws = 20000;
  std::vector<int> counts(10, 0);
  for (int i = 0; i < draws; ++i) ++counts[static_cast<std::size_t>(s.sample(logits).token)];
  CHECK(counts[3] == 0);
  CHECK(counts[6] == 0);
  CHECK(counts[9] == 0);
  double chi_square = 0.0;
  for (std::size_t i : kept) {
    const double expected = draws * std::exp(static_cast<double>(logits[i])) / z;
    chi_square += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  // 6 degrees of freedom: P(chi2 > 22.46) = 0.001.
  CHECK(chi_square < 22.46);
}
