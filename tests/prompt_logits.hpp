#pragma once
// The logits a CPU forward pass gives for every position of a prompt
// (prompt.size() x vocabulary, one thread, activations not rounded to F16),
// for tests that compare two ways of loading or writing the same weights.
#include "gpu/model/cpu_forward.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace pensieve::testing {

inline std::vector<float> prompt_logits(model::ModelWeights weights,
                                        const std::vector<std::int32_t>& prompt) {
  auto forward = model::CpuForward::create(std::move(weights),
                                           {.n_threads = 1, .round_f16_activations = false});
  REQUIRE(forward.has_value());
  auto kv = forward->make_kv_cache(std::int32_t(prompt.size()));
  model::ForwardSequence seq{prompt, 0, &kv, true};
  auto out = forward->forward(std::span(&seq, 1));
  REQUIRE(out.has_value());
  return out->logits;
}

}  // namespace pensieve::testing
