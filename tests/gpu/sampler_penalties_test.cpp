// Repetition, presence and frequency penalties, with the token order they
// produce computed by hand.
#include "gpu/model/sampler.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

namespace pm = pensieve::model;

namespace {

std::vector<std::int32_t> greedy_run(pm::SamplingParams p, const std::vector<float>& logits,
                                     int steps, std::vector<std::int32_t> prompt = {}) {
  p.temperature = 0.0f;
  p.max_tokens = steps;
  pm::Sampler s(p, pm::VocabInfo{static_cast<std::int32_t>(logits.size()), {}}, prompt);
  std::vector<std::int32_t> out;
  for (int i = 0; i < steps; ++i) out.push_back(s.sample(logits).token);
  return out;
}

}  // namespace

TEST_CASE("frequency penalty lowers a token once per occurrence", "[sampler]") {
  // logits 3.0, 2.5, 2.0, 0: after each pick its logit drops by 0.6 per use.
  // 1: 3.0 -> token 0; 2: 2.4, 2.5 -> 1; 3: 2.4, 1.9, 2.0 -> 0;
  // 4: 1.8, 1.9, 2.0 -> 2; 5: 1.8, 1.9, 1.4 -> 1.
  pm::SamplingParams p;
  p.frequency_penalty = 0.6f;
  CHECK(greedy_run(p, {3.0f, 2.5f, 2.0f, 0.0f}, 5) == std::vector<std::int32_t>{0, 1, 0, 2, 1});
}

TEST_CASE("presence penalty lowers a generated token once, however often it appears",
          "[sampler]") {
  // 1: 3.0 -> 0; 2: 2.0, 2.5, 2.0 -> 1; 3: 2.0, 1.5, 2.0 -> 0 (tie, lower id);
  // 4: token 0 is still at 2.0, not 1.0 -> 0 again.
  pm::SamplingParams p;
  p.presence_penalty = 1.0f;
  CHECK(greedy_run(p, {3.0f, 2.5f, 2.0f}, 4) == std::vector<std::int32_t>{0, 1, 0, 0});
}

TEST_CASE("presence and frequency penalties ignore the prompt", "[sampler]") {
  pm::SamplingParams p;
  p.presence_penalty = 5.0f;
  p.frequency_penalty = 5.0f;
  CHECK(greedy_run(p, {3.0f, 2.5f}, 1, {0, 0, 0}) == std::vector<std::int32_t>{0});
}

TEST_CASE("repetition penalty divides positive and multiplies negative logits of seen tokens",
          "[sampler]") {
  // Prompt {3, 0}, penalty 2: token 0 -1.0 -> -2.0, token 3 1.0 -> 0.5,
  // unseen tokens unchanged: -1.5 and 0.8. The largest is now token 2.
  pm::SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<float> logits{-1.0f, -1.5f, 0.8f, 1.0f};
  CHECK(greedy_run(p, logits, 1, {3, 0}) == std::vector<std::int32_t>{2});

  p.temperature = 1.0f;
  pm::Sampler s(p, pm::VocabInfo{4, {}}, std::vector<std::int32_t>{3, 0});
  const double w[] = {std::exp(-2.0), std::exp(-1.5), std::exp(0.8), std::exp(0.5)};
  const double z = w[0] + w[1] + w[2] + w[3];
  const auto dist = s.distribution(logits);
  REQUIRE(dist.size() == 4);
  for (const auto& t : dist) CHECK(t.probability == Approx(w[t.token] / z).epsilon(1e-6));
}

TEST_CASE("repetition penalty also covers generated tokens", "[sampler]") {
  // 1: 2.0 -> 0; 2: token 0 at 2.0 / 4 = 0.5 < 1.0 -> 1; 3: 0.5, 0.25, 0.4 -> 0.
  pm::SamplingParams p;
  p.repetition_penalty = 4.0f;
  CHECK(greedy_run(p, {2.0f, 1.0f, 0.4f}, 3) == std::vector<std::int32_t>{0, 1, 0});
}

TEST_CASE("penalties do not change the reported logprobs", "[sampler]") {
  pm::SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 10.0f;
  p.logprobs = true;
  pm::Sampler s(p, pm::VocabInfo{2, {}}, std::vector<std::int32_t>{0});
  const std::vector<float> logits{2.0f, 1.0f};
  const auto out = s.sample(logits);
  CHECK(out.token == 1);
  CHECK(out.logprob == Approx(1.0 - std::log(std::exp(2.0) + std::exp(1.0))).epsilon(1e-6));
}
