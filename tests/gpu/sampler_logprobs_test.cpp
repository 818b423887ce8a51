// Logprobs, stop tokens and lengths: what a request reports and when it ends.
#include "gpu/model/sampler.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

namespace pm = pensieve::model;

TEST_CASE("logprobs are the log-softmax of the raw logits, computed by hand", "[sampler]") {
  pm::SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.top_logprobs = 3;
  pm::Sampler s(p, pm::VocabInfo{5, {}}, std::vector<std::int32_t>{});
  const std::vector<float> logits{1.0f, 2.0f, 4.0f, 2.0f, -1.0f};
  const double lse =
      std::log(std::exp(1.0) + 2 * std::exp(2.0) + std::exp(4.0) + std::exp(-1.0));
  const auto out = s.sample(logits);
  CHECK(out.token == 2);
  CHECK(out.logprob == Approx(4.0 - lse).epsilon(1e-6));
  REQUIRE(out.top.size() == 3);
  CHECK(out.top[0].token == 2);
  CHECK(out.top[0].logprob == Approx(4.0 - lse).epsilon(1e-6));
  CHECK(out.top[1].token == 1);  // tie with token 3: the lower id first
  CHECK(out.top[1].logprob == Approx(2.0 - lse).epsilon(1e-6));
  CHECK(out.top[2].token == 3);
  CHECK(out.top[2].logprob == Approx(2.0 - lse).epsilon(1e-6));
}

TEST_CASE("logprobs ignore temperature: they are those of the raw logits", "[sampler]") {
  pm::SamplingParams p;
  p.temperature = 0.3f;
  p.top_k = 1;
  p.logprobs = true;
  pm::Sampler s(p, pm::VocabInfo{2, {}}, std::vector<std::int32_t>{});
  const auto out = s.sample(std::vector<float>{0.0f, 1.0f});
  CHECK(out.token == 1);
  CHECK(out.logprob == Approx(1.0 - std::log(1.0 + std::exp(1.0))).epsilon(1e-6));
  CHECK(out.top.empty());
}

TEST_CASE("logprobs stay finite for logits far from zero", "[sampler]") {
  pm::SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  pm::Sampler s(p, pm::VocabInfo{2, {}}, std::vector<std::int32_t>{});
  const auto out = s.sample(std::vector<float>{1000.0f, 999.0f});
  CHECK(out.logprob == Approx(-std::log(1.0 + std::exp(-1.0))).epsilon(1e-6));
}

TEST_CASE("without logprobs asked a step reports none and picks the same tokens", "[sampler]") {
  const std::vector<std::vector<float>> steps{{0.5f, 3.0f, 1.0f}, {2.0f, 2.0f, -1.0f}, {0.0f, 0.0f, 9.0f}};
  for (const float temperature : {0.0f, 0.8f}) {
    pm::SamplingParams asked;
    asked.temperature = temperature;
    asked.seed = 11;
    asked.logprobs = true;
    asked.top_logprobs = 2;
    pm::SamplingParams silent = asked;
    silent.logprobs = false;
    silent.top_logprobs = 0;
    pm::Sampler with(asked, pm::VocabInfo{3, {}}, std::vector<std::int32_t>{});
    pm::Sampler without(silent, pm::VocabInfo{3, {}}, std::vector<std::int32_t>{});
    for (const auto& logits : steps) {
      const auto a = with.sample(logits);
      const auto b = without.sample(logits);
      CHECK(a.token == b.token);
      CHECK(a.logprob < 0.0f);
      CHECK(a.top.size() == 2);
      CHECK(b.logprob == 0.0f);
      CHECK(b.top.empty());
    }
  }
}

TEST_CASE("min_tokens keeps EOS and stop ids from being drawn until reached", "[sampler]") {
  pm::SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.max_tokens = 10;
  p.stop_token_ids = {1};
  pm::Sampler s(p, pm::VocabInfo{4, {3}}, std::vector<std::int32_t>{});
  const std::vector<float> logits{0.0f, 5.0f, 1.0f, 9.0f};  // EOS 3, then stop id 1
  CHECK(s.sample(logits).token == 2);
  CHECK(s.finish_reason(2) == pm::FinishReason::none);
  CHECK(s.sample(logits).token == 2);
  CHECK(s.sample(logits).token == 3);
  CHECK(s.finish_reason(3) == pm::FinishReason::stop);
  CHECK(s.finish_reason(1) == pm::FinishReason::stop);
}

TEST_CASE("ignore_eos makes EOS an ordinary token that neither stops nor is masked",
          "[sampler]") {
  pm::SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.min_tokens = 3;
  p.max_tokens = 3;
  pm::Sampler s(p, pm::VocabInfo{4, {3}}, std::vector<std::int32_t>{});
  const std::vector<float> logits{0.0f, 5.0f, 1.0f, 9.0f};
  CHECK(s.sample(logits).token == 3);
  CHECK(s.finish_reason(3) == pm::FinishReason::none);
  s.sample(logits);
  CHECK(s.sample(logits).token == 3);
  CHECK(s.finish_reason(3) == pm::FinishReason::length);
}

TEST_CASE("a request ends with length after max_tokens", "[sampler]") {
  pm::SamplingParams p;
  p.max_tokens = 2;
  pm::Sampler s(p, pm::VocabInfo{3, {}}, std::vector<std::int32_t>{});
  const std::vector<float> logits{0.0f, 0.0f, 0.0f};
  CHECK(s.finish_reason(s.sample(logits).token) == pm::FinishReason::none);
  CHECK(s.finish_reason(s.sample(logits).token) == pm::FinishReason::length);
  CHECK(s.generated_tokens() == 2);
}

TEST_CASE("validate names the field of an impossible parameter", "[sampler]") {
  CHECK(pm::validate(pm::SamplingParams{}).empty());
  auto with = [](auto change) {
    pm::SamplingParams p;
    change(p);
    return pm::validate(p);
  };
  CHECK_THAT(with([](auto& p) { p.temperature = -1.0f; }), Catch::Contains("temperature"));
  CHECK_THAT(with([](auto& p) { p.top_p = 0.0f; }), Catch::Contains("top_p"));
  CHECK_THAT(with([](auto& p) { p.min_p = 1.5f; }), Catch::Contains("min_p"));
  CHECK_THAT(with([](auto& p) { p.repetition_penalty = 0.0f; }),
             Catch::Contains("repetition_penalty"));
  CHECK_THAT(with([](auto& p) { p.top_logprobs = 21; }), Catch::Contains("top_logprobs"));
  CHECK_THAT(with([](auto& p) { p.max_tokens = 0; }), Catch::Contains("max_tokens"));
  CHECK_THAT(with([](auto& p) { p.min_tokens = 17; }), Catch::Contains("min_tokens"));
}
