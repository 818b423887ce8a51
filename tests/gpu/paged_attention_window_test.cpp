// Sliding-window attention and attention-logit soft-capping in the CPU paged
// kernel: the F64 reference under every decode strategy (a split decode row
// keeps empty states for the tiles before its window), and the contiguous
// kernel's bits.
#include "gpu/kernels/cpu/attention_contiguous.hpp"
#include "gpu/kernels/cpu/paged_attention.hpp"
#include "tests/gpu/paged_attention_fixture.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

using namespace pensieve;
using namespace pensieve::kernels;
using pensieve::test::Batch;
using pensieve::test::BatchSpec;

namespace {

std::vector<float> run_paged(const Batch& b, cpu::WorkRunner& runner, std::int32_t window, float softcap,
                             AttentionPlanOptions options) {
  options.workers = runner.workers();
  const auto plan =
      plan_paged_attention({b.q_start, b.spec.context_tokens}, b.spec.n_kv_heads, options).value();
  std::vector<float> out(std::size_t(b.out_elems()), std::numeric_limits<float>::quiet_NaN());
  cpu::AttentionWorkspace ws;
  PagedAttentionParams p = b.params(out.data());
  p.sliding_window = window;
  p.logit_softcap = softcap;
  cpu::paged_attention(p, plan, ws, runner);
  return out;
}

BatchSpec mixed_spec(std::int32_t head_dim) {
  BatchSpec spec;
  spec.context_tokens = {1, 7, 40, 300, 1100, 65, 2000};
  spec.q_lens = {1, 7, 1, 1, 1, 30, 1};
  spec.head_dim = head_dim;
  spec.group = 2;
  spec.block_tokens = 16;
  return spec;
}

std::vector<DecodePlanChoice> strategies() {
  return {{DecodeStrategy::per_sequence, 1, 0}, {DecodeStrategy::split_kv, 4, 0}, {DecodeStrategy::packed, 1, 2}};
}

}  // namespace

TEST_CASE("windowed paged attention matches the F64 reference under every decode strategy",
          "[paged_attention]") {
  std::mt19937_64 rng(77);
  test::PooledRunner pooled(3);
  for (std::int32_t head_dim : {16, 64}) {
    const Batch b = test::make_batch(mixed_spec(head_dim), rng);
    for (std::int32_t window : {1, 5, 33, 100, 4096}) {
      const auto ref = test::reference_attention(b, window);
      std::vector<float> first;
      for (const auto& choice : strategies()) {
        AttentionPlanOptions o;
        o.kv_tile_tokens = 32;
        o.decode = choice;
        const auto out = run_paged(b, pooled.runner, window, 0.0f, o);
        INFO("head_dim " << head_dim << " window " << window << " " << choice.describe());
        CHECK(test::max_relative_error(out, ref, head_dim) < 1e-5);
        // Every strategy the same bits (empty tile states fold as the identity).
        if (first.empty()) first = out;
        CHECK(std::memcmp(first.data(), out.data(), out.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("a window changes the result and a window past the context does not", "[paged_attention]") {
  std::mt19937_64 rng(78);
  test::PooledRunner pooled(2);
  const Batch b = test::make_batch(mixed_spec(64), rng);
  AttentionPlanOptions o;
  o.kv_tile_tokens = 32;
  const auto full = run_paged(b, pooled.runner, 0, 0.0f, o);
  const auto wide = run_paged(b, pooled.runner, 2001, 0.0f, o);
  const auto narrow = run_paged(b, pooled.runner, 16, 0.0f, o);
  CHECK(std::memcmp(full.data(), wide.data(), full.size() * sizeof(float)) == 0);
  CHECK(test::max_relative_error(narrow, test::reference_attention(b), 64) > 1e-2);
}

TEST_CASE("soft-capped paged attention matches the F64 reference, windowed or not", "[paged_attention]") {
  std::mt19937_64 rng(79);
  test::PooledRunner pooled(3);
  const Batch b = test::make_batch(mixed_spec(64), rng);
  for (std::int32_t window : {0, 9}) {
    for (float cap : {0.3f, 2.0f}) {
      const auto ref = test::reference_attention(b, window, cap);
      for (const auto& choice : strategies()) {
        AttentionPlanOptions o;
        o.kv_tile_tokens = 32;
        o.decode = choice;
        const auto out = run_paged(b, pooled.runner, window, cap, o);
        INFO("window " << window << " cap " << cap << " " << choice.describe());
        CHECK(test::max_relative_error(out, ref, 64) < 1e-5);
      }
    }
  }
  // A tight cap flattens the softmax: far from the uncapped result.
  AttentionPlanOptions o;
  CHECK(test::max_relative_error(run_paged(b, pooled.runner, 0, 0.3f, o), test::reference_attention(b), 64) > 1e-2);
}

TEST_CASE("windowed contiguous and paged attention agree bit for bit", "[paged_attention]") {
  std::mt19937_64 rng(80);
  test::PooledRunner pooled(3);
  const Batch b = test::make_batch(mixed_spec(64), rng);
  AttentionPlanOptions o;
  o.kv_tile_tokens = 32;
  o.workers = pooled.runner.workers();
  const auto plan = plan_paged_attention({b.q_start, b.spec.context_tokens}, b.spec.n_kv_heads, o).value();
  const auto paged = run_paged(b, pooled.runner, 21, 1.5f, o);
  std::vector<float> contiguous(paged.size(), std::numeric_limits<float>::quiet_NaN());
  cpu::ContiguousAttentionParams p = b.contiguous_params(contiguous.data());
  p.sliding_window = 21;
  p.logit_softcap = 1.5f;
  cpu::AttentionWorkspace ws;
  cpu::contiguous_attention(p, plan, ws, pooled.runner);
  CHECK(std::memcmp(paged.data(), contiguous.data(), paged.size() * sizeof(float)) == 0);
}
