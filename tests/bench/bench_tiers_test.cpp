// engine-bench --tiers at a tiny size: the report has every field the
// README and bench/results rely on, and the four modes (cost-aware, LRU,
// device only, --no-state) wrote the same greedy tokens.
#include "bench/engine-bench/tiers.hpp"
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/test_model.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_model.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

namespace json = boost::json;
using namespace pensieve;

namespace {

std::vector<std::vector<std::string>> conversations() {
  return {{"Hello there, how are you today?", "Tell me about the sea.", "And the mountains?"},
          {"Name a colour that you like.", "Why that one?", "Another, please."},
          {"What is a block table in a KV cache?", "How big is one block?", "Thanks."},
          {"Write one line about autumn.", "Now one about spring.", "And winter?"}};
}

}  // namespace

TEST_CASE("the tier comparison reports every mode and all modes write the same greedy tokens", "[bench][tiers]") {
  pensieve::testing::TempDir dir("tier-bench");
  REQUIRE(model::write_builtin_vocab_gguf(dir / "vocab.gguf").has_value());
  auto o = pensieve::testing::tiny_model_options();
  o.max_context = 512;
  o.vocab_from = dir / "vocab.gguf";
  REQUIRE(model::make_test_model(o, dir / "model.gguf").has_value());

  bench::TierBenchOptions options;
  options.model_path = (dir / "model.gguf").string();
  options.calibration_model_path = options.model_path;
  options.scratch_dir = (dir / "scratch").string();
  options.repetitions = 1;
  options.threads = 1;
  options.block_tokens = 16;  // several blocks per conversation, so a quarter is a real squeeze
  bench::ReplayOptions replay;
  replay.think_time_s = 0.05;
  replay.stagger_s = 0.02;
  replay.max_tokens = 6;
  auto report = bench::run_tier_comparison(conversations(), replay, options);
  REQUIRE(report.has_value());
  const json::object& r = *report;

  const auto& sizing = r.at("sizing").as_object();
  CHECK(sizing.at("kv_device_blocks").as_int64() < sizing.at("total_kv_blocks").as_int64());
  CHECK(sizing.at("kv_bytes_per_token").to_number<std::int64_t>() == 2 * 2 * 2 * 16 * 2);  // layers*K,V*heads*dim*f16
  const auto& modes = r.at("modes").as_object();
  REQUIRE(modes.size() == 4);
  for (const char* name : {"a_cost_aware_tiers", "b_lru_tiers", "c_device_only_recompute", "d_no_state"}) {
    INFO(name);
    const auto& m = modes.at(name).as_object();
    CHECK(m.at("median_output_tokens_per_s").to_number<double>() > 0);
    CHECK(m.at("median_ttft_p50_s").to_number<double>() > 0);
    for (const char* field : {"median_recomputed_tokens", "hit_tokens_device", "hit_tokens_host", "hit_tokens_disk"}) {
      CHECK(m.contains(field));
    }
    const auto& rep = m.at("repetitions").as_array().at(0).as_object();
    CHECK(rep.at("failed_turns").to_number<std::int64_t>() == 0);
    CHECK(rep.at("output_bytes_recorded").as_int64() > 0);  // the comparison below saw real text
  }
  // --no-state keeps nothing, so it reuses nothing and feeds every prompt whole.
  const auto& d = modes.at("d_no_state").as_object();
  CHECK(d.at("hit_tokens_device").as_int64() + d.at("hit_tokens_host").as_int64() +
            d.at("hit_tokens_disk").as_int64() == 0);
  const auto prefill = [&](const char* name) {
    return modes.at(name).at("repetitions").at(0).at("prefill_tokens_computed").as_int64();
  };
  CHECK(prefill("a_cost_aware_tiers") < prefill("d_no_state"));
  for (const char* field : {"throughput_a_over_c", "throughput_a_over_d", "ttft_p50_c_over_a", "ttft_p50_d_over_a",
                            "recomputed_a", "recomputed_b", "recomputed_a_over_b"}) {
    CHECK(r.at(field).is_number());
  }
  CHECK(r.at("targets").as_object().size() == 3);
  CHECK(r.at("identical_greedy_tokens").as_bool());
}
