// Cost of one sampling step (Sampler::sample) for one sequence, over real
// vocabulary sizes: Llama 2 (32,000), Llama 3 (128,256) and Qwen2 (151,936).
// A batch of B sequences pays B of these per iteration on the host, so a
// step of tens of microseconds is a decode iteration's worth at batch 100.
// Logits are drawn from N(0, 3^2) with a fixed seed, so the distribution has
// a head and a long tail as a real model's does.
#include "gpu/model/sampler.hpp"

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace {

namespace pm = pensieve::model;

std::vector<float> logits_of(std::int32_t vocab) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<std::size_t>(vocab));
  for (float& l : logits) l = normal(rng);
  return logits;
}

enum Mode : int { greedy, greedy_logprobs, temperature, nucleus, top_k, top_logprobs };

pm::SamplingParams params_of(Mode mode) {
  pm::SamplingParams p;
  p.max_tokens = 1 << 30;
  p.seed = 3;
  switch (mode) {
    case greedy: p.temperature = 0.0f; break;
    case greedy_logprobs:
      p.temperature = 0.0f;
      p.logprobs = true;
      break;
    case temperature: p.temperature = 1.0f; break;  // the OpenAI API's defaults
    case nucleus:
      p.temperature = 0.7f;
      p.top_p = 0.9f;
      break;
    case top_k:
      p.temperature = 0.8f;
      p.top_k = 40;
      break;
    case top_logprobs:  // greedy with the 5 best alternatives' logprobs
      p.temperature = 0.0f;
      p.logprobs = true;
      p.top_logprobs = 5;
      break;
  }
  return p;
}

void BM_SampleStep(benchmark::State& state) {
  const auto vocab = static_cast<std::int32_t>(state.range(0));
  const auto mode = static_cast<Mode>(state.range(1));
  const std::vector<float> logits = logits_of(vocab);
  pm::Sampler sampler(params_of(mode), pm::VocabInfo{vocab, {}}, std::vector<std::int32_t>{});
  for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(logits));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SampleStep)
    ->ArgNames({"vocab", "mode"})
    ->ArgsProduct({{32000, 128256, 151936}, {greedy, greedy_logprobs, temperature, nucleus, top_k, top_logprobs}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
