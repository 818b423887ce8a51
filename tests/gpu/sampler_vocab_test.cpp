// The sampler over real vocabulary sizes against a plain reference: sort
// every token, cut by top-k, top-p and min-p in double, renormalise. The
// sampler only sorts the head above a logit threshold and weighs in float
// (sampler_math.hpp); the kept tokens, their order and their probabilities
// must be the reference's.
#include "gpu/model/sampler.hpp"
#include "gpu/model/sampler_math.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace pm = pensieve::model;

namespace {

std::vector<float> normal_logits(std::size_t n, float sigma, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(rng);
  return logits;
}

// The textbook order of operations (temperature, top-k, top-p, min-p), all
// in double, over every token.
std::vector<pm::TokenProbability> reference(const std::vector<float>& logits, const pm::SamplingParams& p) {
  struct Entry {
    double logit;
    std::int32_t token;
  };
  std::vector<Entry> e;
  for (std::size_t i = 0; i < logits.size(); ++i)
    e.push_back({double(logits[i] / p.temperature), std::int32_t(i)});
  std::sort(e.begin(), e.end(), [](const Entry& a, const Entry& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
  });
  if (p.top_k > 0 && std::size_t(p.top_k) < e.size()) e.resize(std::size_t(p.top_k));
  const double max = e.front().logit;
  double total = 0.0;
  for (const Entry& x : e) total += std::exp(x.logit - max);
  if (p.top_p < 1.0f) {
    double ahead = 0.0;
    std::size_t keep = 0;
    while (keep < e.size() && ahead < double(p.top_p) * total) ahead += std::exp(e[keep++].logit - max);
    e.resize(keep);
  }
  std::vector<pm::TokenProbability> out;
  double kept = 0.0;
  for (const Entry& x : e) {
    const double w = std::exp(x.logit - max);
    if (w >= p.min_p) {
      out.push_back({x.token, w});
      kept += w;
    }
  }
  for (auto& t : out) t.probability /= kept;
  return out;
}

void check_same(const std::vector<float>& logits, const pm::SamplingParams& p) {
  pm::Sampler sampler(p, pm::VocabInfo{std::int32_t(logits.size()), {}}, std::vector<std::int32_t>{});
  const auto got = sampler.distribution(logits);
  auto want = reference(logits, p);
  if (p.top_k <= 0 && p.top_p >= 1.0f) {
    // No filter: drawn in id order.
    std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.token < b.token; });
  }
  INFO("vocab " << logits.size() << " temperature " << p.temperature << " top_k " << p.top_k << " top_p "
                << p.top_p << " min_p " << p.min_p);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].token == want[i].token);
    REQUIRE(got[i].probability == Approx(want[i].probability).epsilon(1e-5).margin(1e-12));
  }
}

}  // namespace

TEST_CASE("over 32k and 152k tokens the kept tokens and probabilities are the reference's", "[sampler]") {
  for (const std::size_t vocab : {std::size_t{32000}, std::size_t{151936}}) {
    for (const float sigma : {3.0f, 0.05f}) {  // a peaked head, and nearly flat
      const auto logits = normal_logits(vocab, sigma, unsigned(vocab) + unsigned(sigma * 100));
      pm::SamplingParams p;
      p.temperature = 0.7f;
      p.top_p = 0.9f;
      check_same(logits, p);  // top-p alone
      p.top_p = 0.3f;
      check_same(logits, p);
      p.top_p = 1.0f;
      p.top_k = 40;
      check_same(logits, p);  // top-k alone
      p.top_k = 5000;
      p.top_p = 0.8f;
      check_same(logits, p);  // both
      p.top_k = 0;
      p.top_p = 1.0f;
      p.min_p = 0.05f;
      check_same(logits, p);  // min-p over the dense weights
    }
  }
}

TEST_CASE("a top-p too close to 1 for any head falls back to sorting every token", "[sampler]") {
  // No threshold holds 1.0001 x top_p of the mass, so every token is a
  // candidate; the result is still the reference's.
  std::vector<float> logits(20000, -5.0f);
  logits[123] = 0.0f;
  for (std::size_t i = 0; i < logits.size(); i += 7) logits[i] = -4.0f;
  pm::SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.99995f;
  check_same(logits, p);
}

TEST_CASE("the vectorised passes agree with their scalar definitions", "[sampler]") {
  namespace sm = pm::sampler_math;
  for (const std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{1000}}) {
    auto x = normal_logits(n, 2.0f, unsigned(n));
    if (n > 3) {
      x[2] = -std::numeric_limits<float>::infinity();
      x[n - 1] = *std::max_element(x.begin(), x.end());  // a tie with an earlier maximum
    }
    const float max = *std::max_element(x.begin(), x.end());
    CHECK(sm::max_value(x) == max);
    CHECK(sm::argmax(x) == std::int32_t(std::find(x.begin(), x.end(), max) - x.begin()));
    std::vector<float> w(n);
    sm::exp_weights(x, max, w);
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      if (std::isinf(x[i])) {
        CHECK(w[i] == 0.0f);
      } else {
        CHECK(w[i] == sm::weight_of(x[i], max));  // vector lanes == the scalar form, bit for bit
        CHECK(double(w[i]) == Approx(std::exp(double(x[i]) - max)).epsilon(1e-6));
      }
      total += w[i];
    }
    CHECK(sm::sum(w) == Approx(total).epsilon(1e-6));
    double lse = 0.0;
    for (float v : x)
      if (!std::isinf(v)) lse += std::exp(double(v) - max);
    CHECK(sm::log_sum_exp(x) == Approx(double(max) + std::log(lse)).epsilon(1e-6));
    // The inverse CDF: just below each cumulative step lands on that token.
    double cumulative = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      // Weights far above the float rounding of a block's sum.
      if (w[i] > 1e-3f) CHECK(sm::draw(w, cumulative + 0.5 * w[i]) == std::int32_t(i));
      cumulative += w[i];
    }
    const float t = max - 1.0f;
    std::vector<std::int32_t> idx;
    sm::indices_at_least(x, t, idx);
    std::vector<std::int32_t> want;
    for (std::size_t i = 0; i < n; ++i)
      if (x[i] >= t) want.push_back(std::int32_t(i));
    CHECK(idx == want);
    CHECK(sm::count_at_least(x, t) == want.size());
  }
}

TEST_CASE("top logprobs over a large vocabulary are the reference's n best, masked tokens last", "[sampler]") {
  const auto reference = [](const std::vector<float>& logits, std::size_t n) {
    std::vector<std::int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
      return logits[std::size_t(a)] > logits[std::size_t(b)];
    });
    ids.resize(n);
    return ids;
  };
  const auto ids_of = [](const std::vector<pm::TokenLogprob>& top) {
    std::vector<std::int32_t> ids;
    for (const auto& t : top) ids.push_back(t.token);
    return ids;
  };
  auto logits = normal_logits(32000, 3.0f, 99);
  logits[7] = logits[8] = 40.0f;  // a tie at the top: the lower id first
  const double lse = pm::log_sum_exp(logits);
  for (const std::int32_t n : {1, 5, 20}) {
    const auto top = pm::top_logprobs(logits, n, lse);
    CHECK(ids_of(top) == reference(logits, std::size_t(n)));
    for (const auto& t : top) CHECK(t.logprob == float(double(logits[std::size_t(t.token)]) - lse));
  }
  // Fewer finite tokens than asked: the masked ones follow, by id.
  std::vector<float> masked(100, -std::numeric_limits<float>::infinity());
  masked[50] = 1.0f;
  masked[10] = 2.0f;
  const auto top = pm::top_logprobs(masked, 4, pm::log_sum_exp(masked));
  CHECK(ids_of(top) == std::vector<std::int32_t>{10, 50, 0, 1});
}
