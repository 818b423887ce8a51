// The decode plan table the device script writes: read back exactly, every
// key optional, anything not understood refused with its name.
#include "gpu/kernels/decode_plan_table.hpp"

#include <catch2/catch.hpp>

using namespace pensieve;

TEST_CASE("a decode plan table sets the thresholds it names and keeps the defaults of the others",
          "[decode_plan]") {
  auto t = kernels::parse_decode_plan_table(
      R"({"device": "NVIDIA H200", "split_min_context_tokens": 2048, "packed_imbalance_ratio": 3.5,
          "source": "bench/results/2026-12-02-cuda-attention.json"})");
  REQUIRE(t.has_value());
  CHECK(t->device == "NVIDIA H200");
  CHECK(t->thresholds.split_min_context_tokens == 2048);
  CHECK(t->thresholds.packed_imbalance_ratio == 3.5);
  const kernels::DecodePlanThresholds defaults;
  CHECK(t->thresholds.min_items_per_worker == defaults.min_items_per_worker);
  CHECK(t->thresholds.target_items_per_worker == defaults.target_items_per_worker);
  CHECK(kernels::describe(t->thresholds) ==
        "min_items_per_worker=2 split_min_context_tokens=2048 packed_imbalance_ratio=3.5 target_items_per_worker=4");
  // The thresholds change the choice: a 1500-token sequence is split by the
  // defaults (1024) and not by this table (2048).
  const std::vector<std::int32_t> one{1500};
  const kernels::DecodeBatchShape shape{one, 8, 132, 256};
  CHECK(kernels::choose_decode_plan(shape, defaults).strategy == kernels::DecodeStrategy::split_kv);
  CHECK(kernels::choose_decode_plan(shape, t->thresholds).strategy != kernels::DecodeStrategy::split_kv);
}

TEST_CASE("a decode plan table with an unknown key, a wrong type or a bad value is refused by name", "[decode_plan]") {
  const auto err = [](const char* text) {
    auto t = kernels::parse_decode_plan_table(text);
    REQUIRE_FALSE(t.has_value());
    return t.error().message;
  };
  CHECK(err(R"({"split_min_context": 10})") == "decode plan table: unknown key 'split_min_context'");
  CHECK(err(R"({"packed_imbalance_ratio": "4"})") == "decode plan table: 'packed_imbalance_ratio' must be a number");
  CHECK(err(R"({"min_items_per_worker": -1})") == "decode plan table: 'min_items_per_worker' must be positive");
  CHECK(err(R"({"packed_imbalance_ratio": 0.5})") == "decode plan table: 'packed_imbalance_ratio' must be at least 1");
  CHECK(err(R"({"split_min_context_tokens": 10.5})") ==
        "decode plan table: 'split_min_context_tokens' must be an integer");
  CHECK(err("[1, 2]") == "decode plan table: the top level must be an object");
  CHECK(err("{").rfind("decode plan table: not JSON", 0) == 0);
  CHECK_FALSE(kernels::load_decode_plan_table("/nonexistent/plan.json").has_value());
}
