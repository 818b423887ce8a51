// Weights copied onto huge pages (weight_arena.hpp) hold the loader's bytes,
// keep a tied head shared with the embedding, and leave every logit's bits
// unchanged.
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/weight_arena.hpp"
#include "tests/tiny_model.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

namespace pm = pensieve::model;

namespace {

std::vector<const pm::Tensor*> matrices(const pm::ModelWeights& w) {
  std::vector<const pm::Tensor*> out{&w.output, &w.output_norm};
  for (const auto& l : w.layers)
    for (const pm::Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
      out.push_back(t);
  return out;
}

std::vector<float> logits_of(pm::ModelWeights w, bool huge_pages) {
  auto fwd = pm::CpuForward::create(std::move(w), {.n_threads = 2, .min_parallel_cost = 0,
                                                   .weights_on_huge_pages = huge_pages,
                                                   .log_weight_placement = false});
  REQUIRE(fwd.has_value());
  CHECK(fwd->weight_placement().on_arena == huge_pages);
  const std::vector<std::int32_t> prompt{5, 9, 2, 7, 11};
  auto kv = fwd->make_kv_cache(8);
  pm::ForwardSequence seq{prompt, 0, &kv, true};
  auto out = fwd->forward(std::span(&seq, 1));
  REQUIRE(out.has_value());
  std::int32_t next = 3;
  pm::ForwardSequence step{std::span(&next, 1), kv.size_tokens(), &kv, false};
  auto decoded = fwd->forward(std::span(&step, 1));
  REQUIRE(decoded.has_value());
  std::vector<float> all = out->logits;
  all.insert(all.end(), decoded->logits.begin(), decoded->logits.end());
  return all;
}

}  // namespace

TEST_CASE("placing weights on huge pages copies every tensor's bytes to 2 MiB aligned memory",
          "[model]") {
  pm::TestModelOptions o = pensieve::testing::tiny_model_options();
  o.dtype = pm::DType::f16;
  o.tied_output = false;
  const pm::ModelWeights mapped = pensieve::testing::tiny_model(o);
  pm::ModelWeights placed = mapped;
  const pm::WeightPlacement p = pm::place_weights_on_huge_pages(placed);
  REQUIRE(p.on_arena);
  CHECK(p.arena_bytes % (std::size_t(2) << 20) == 0);
  CHECK(p.copied_bytes <= p.arena_bytes);
  CHECK(p.huge_page_bytes <= p.arena_bytes);
  const auto before = matrices(mapped), after = matrices(placed);
  REQUIRE(before.size() == after.size());
  const auto* lo = after.front()->data;
  for (std::size_t i = 0; i < before.size(); ++i) {
    INFO(before[i]->name);
    CHECK(after[i]->data != before[i]->data);
    CHECK(after[i]->size_bytes == before[i]->size_bytes);
    CHECK(std::memcmp(after[i]->data, before[i]->data, before[i]->size_bytes) == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(after[i]->data) % 64 == 0);
    lo = std::min(lo, after[i]->data);
  }
  CHECK(reinterpret_cast<std::uintptr_t>(lo) % (std::uintptr_t(2) << 20) == 0);
  // An untied embedding is read one row per token: it stays where it was.
  CHECK(placed.token_embedding.data == mapped.token_embedding.data);
}

TEST_CASE("a tied output head stays shared with the embedding on huge pages", "[model]") {
  pm::ModelWeights placed = pensieve::testing::tiny_model();
  REQUIRE(placed.config.tied_output);
  const pm::ModelWeights mapped = placed;
  REQUIRE(pm::place_weights_on_huge_pages(placed).on_arena);
  CHECK(placed.output.data == placed.token_embedding.data);
  CHECK(placed.output.data != mapped.output.data);
  CHECK(std::memcmp(placed.output.data, mapped.output.data, mapped.output.size_bytes) == 0);
}

TEST_CASE("a forward pass has the same logits' bits with weights on huge pages as from the mapping",
          "[model]") {
  for (pm::DType dtype : {pm::DType::f32, pm::DType::f16, pm::DType::q8_0}) {
    pm::TestModelOptions o = pensieve::testing::tiny_model_options();
    o.dtype = dtype;
    const pm::ModelWeights w = pensieve::testing::tiny_model(o);
    const auto mapped = logits_of(w, false), placed = logits_of(w, true);
    INFO("dtype " << pm::dtype_name(dtype));
    REQUIRE(mapped.size() == placed.size());
    CHECK(std::memcmp(mapped.data(), placed.data(), mapped.size() * sizeof(float)) == 0);
  }
}
