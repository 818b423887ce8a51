// The decode plan chooser (pure policy) and the three decode strategies,
// which must give the same bits on the CPU.
#include "gpu/kernels/decode_plan.hpp"
#include "gpu/kernels/cpu/paged_attention.hpp"
#include "tests/gpu/paged_attention_fixture.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

using namespace pensieve;
using namespace pensieve::kernels;

TEST_CASE("many sequences of similar length get one item per sequence", "[decode_plan]") {
  const std::vector<std::int32_t> ctx(64, 1000);
  const auto c = choose_decode_plan({ctx, 8, 16, 128});
  CHECK(c.strategy == DecodeStrategy::per_sequence);
}

TEST_CASE("one long sequence is split across the workers", "[decode_plan]") {
  const std::vector<std::int32_t> ctx = {32768};
  const auto c = choose_decode_plan({ctx, 8, 132, 128});
  CHECK(c.strategy == DecodeStrategy::split_kv);
  CHECK(c.num_splits == 66);  // ceil(132 workers * 4 items / 8 heads)
  CHECK(c.describe() == "split_kv splits=66");
}

TEST_CASE("a few short sequences are not split", "[decode_plan]") {
  const std::vector<std::int32_t> ctx = {100, 200};
  CHECK(choose_decode_plan({ctx, 8, 132, 128}).strategy == DecodeStrategy::per_sequence);
}

TEST_CASE("a batch of mixed lengths is packed into equal items", "[decode_plan]") {
  std::vector<std::int32_t> ctx(60, 100);
  ctx.push_back(20000);  // one long straggler among many short ones
  const auto c = choose_decode_plan({ctx, 4, 8, 128});
  CHECK(c.strategy == DecodeStrategy::packed);
  // (60 + 157 tiles) x 4 KV heads of work over 8 workers x 4 items each: ceil(868 / 32).
  CHECK(c.tiles_per_item == 28);
}

TEST_CASE("an empty decode batch needs no plan", "[decode_plan]") {
  CHECK(choose_decode_plan({{}, 8, 16, 128}).strategy == DecodeStrategy::per_sequence);
}

TEST_CASE("the plan cuts split decode rows at kv tile boundaries", "[decode_plan]") {
  const std::vector<std::int32_t> q_start = {0, 1, 4}, ctx = {1000, 50};
  AttentionPlanOptions o;
  o.kv_tile_tokens = 128;
  o.rows_per_item = 2;
  o.decode = DecodePlanChoice{DecodeStrategy::split_kv, 3, 0};
  const auto plan = plan_paged_attention({q_start, ctx}, 2, o).value();
  // Sequence 0: 8 tiles in 3 parts of 3, 3, 2 tiles; sequence 1: 3 rows in items of 2 and 1.
  REQUIRE(plan.items.size() == 5);
  CHECK((plan.items[0].kv_begin == 0 && plan.items[0].kv_end == 384 && plan.items[0].merge == 0));
  CHECK((plan.items[1].kv_begin == 384 && plan.items[1].kv_end == 768));
  CHECK((plan.items[2].kv_begin == 768 && plan.items[2].kv_end == 1000));
  CHECK((plan.items[3].seq == 1 && plan.items[3].row_begin == 0 && plan.items[3].row_count == 2));
  CHECK(
      (plan.items[4].row_begin == 2 && plan.items[4].row_count == 1 && plan.items[4].merge == -1));
  REQUIRE(plan.merges.size() == 1);
  CHECK((plan.merges[0].first_item == 0 && plan.merges[0].item_count == 3 &&
         plan.merges[0].num_tiles == 8));
  CHECK(plan.partial_tiles == 8);
}

TEST_CASE("the three decode strategies give bit-identical results", "[decode_plan]") {
  std::mt19937_64 rng(42);
  test::PooledRunner pooled(3);
  cpu::WorkRunner& pool = pooled.runner;
  for (int trial = 0; trial < 6; ++trial) {
    test::BatchSpec spec;
    spec.group = trial % 2 == 0 ? 4 : 8;
    spec.head_dim = trial % 3 == 0 ? 40 : 64;
    spec.block_tokens = 8 << (trial % 3);
    const auto n = 1 + std::int32_t(rng() % 24);
    for (std::int32_t s = 0; s < n; ++s) {
      spec.context_tokens.push_back(1 + std::int32_t(rng() % (s % 5 == 0 ? 8192 : 600)));
      spec.q_lens.push_back(s % 4 == 3 ? std::min(spec.context_tokens.back(), 9)
                                       : 1);  // mixed with prefill
    }
    const test::Batch b = test::make_batch(spec, rng);
    std::vector<std::vector<float>> outs;
    for (DecodePlanChoice choice : {DecodePlanChoice{DecodeStrategy::per_sequence, 1, 0},
                                    DecodePlanChoice{DecodeStrategy::split_kv, 5, 0},
                                    DecodePlanChoice{DecodeStrategy::packed, 1, 3}}) {
      AttentionPlanOptions o;
      o.decode = choice;
      o.workers = pool.workers();
      const auto plan =
          plan_paged_attention({b.q_start, spec.context_tokens}, spec.n_kv_heads, o).value();
      outs.emplace_back(std::size_t(b.out_elems()), std::numeric_limits<float>::quiet_NaN());
      cpu::AttentionWorkspace ws;
      cpu::paged_attention(b.params(outs.back().data()), plan, ws, pool);
    }
    CHECK(test::max_relative_error(outs[0], test::reference_attention(b), spec.head_dim) < 1e-5);
    CHECK(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(float)) == 0);
    CHECK(std::memcmp(outs[0].data(), outs[2].data(), outs[0].size() * sizeof(float)) == 0);
  }
}
