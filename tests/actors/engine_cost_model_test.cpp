// The eviction cost model the engine runs with: measured at start-up by
// timing prefills on its own backend, read from a profile file, or the
// fixed defaults; the scheduler weighs exactly the constants the engine
// reports.
#include "tests/actors/engine_fixture.hpp"

#include <fstream>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

actors::EngineOptions small_options() {
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_cache_mb = 16;
  o.kv_host_mb = 0;
  return o;
}

}  // namespace

TEST_CASE("the engine times prefills of 32, 128 and 512 tokens at start-up and evicts by the fitted constants",
          "[engine][cost_model]") {
  actors::EngineOptions o = small_options();
  o.cost_model_source = actors::CostModelSource::measured;
  auto engine = actors::Engine::create(stories_model(), o);
  REQUIRE(engine.has_value());
  const actors::CostModelReport& r = (*engine)->cost_model();
  CHECK(r.measured);
  CHECK(r.source == "measured");
  REQUIRE(r.samples.size() == 3);
  CHECK(r.samples[0].tokens == 32);
  CHECK(r.samples[1].tokens == 128);
  CHECK(r.samples[2].tokens == 512);
  for (const auto& s : r.samples) CHECK(s.seconds > 0.0);
  // Seconds, not the defaults' relative units: a 512-token prefill of this
  // tiny model takes well under a second in a release build (1.1 s under
  // TSan on a loaded 2-core machine, 2026-12-02), where the defaults price
  // it at ~640 units; 10 keeps the two apart under every build.
  CHECK(r.model.per_token >= 0.0);
  CHECK(r.model.per_token_pair >= 0.0);
  CHECK(r.model.range_cost(0, 512) > 0.0);
  CHECK(r.model.range_cost(0, 512) < 10.0);
  CHECK(actors::CostModel{}.range_cost(0, 512) > 100.0);
  CHECK(r.model.range_cost(0, 512) > r.model.range_cost(0, 32));
  CHECK(r.model.per_token != actors::CostModel{}.per_token);

  asio::io_context io;
  const actors::SchedulerStats stats = run(io, (*engine)->stats());
  CHECK(stats.cost_model.per_token == r.model.per_token);
  CHECK(stats.cost_model.per_token_pair == r.model.per_token_pair);
  CHECK_THAT(actors::describe(r), Catch::Contains("(measured: prefills of 32 tokens in"));
}

TEST_CASE("a short context or batch cuts the timed prefills to what one pass holds, still two lengths",
          "[engine][cost_model]") {
  actors::EngineOptions o = small_options();
  o.cost_model_source = actors::CostModelSource::measured;
  o.scheduler.max_batch_tokens = 64;
  auto engine = actors::Engine::create(stories_model(), o);
  REQUIRE(engine.has_value());
  const actors::CostModelReport& r = (*engine)->cost_model();
  REQUIRE(r.samples.size() == 2);
  CHECK(r.samples[0].tokens == 32);
  CHECK(r.samples[1].tokens == 64);
}

TEST_CASE("without calibration the engine keeps the given constants, or a profile file's, and a bad profile fails "
          "start-up naming its line",
          "[engine][cost_model]") {
  asio::io_context io;
  {
    auto engine = actors::Engine::create(stories_model(), small_options());
    REQUIRE(engine.has_value());
    CHECK_FALSE((*engine)->cost_model().measured);
    CHECK((*engine)->cost_model().source == "default");
    CHECK(run(io, (*engine)->stats()).cost_model.per_token == 1.0);
  }
  TempDir dir;
  const std::string profile = (dir / "cost.txt").string();
  std::ofstream(profile) << "# measured 2026-12-02\nper_token_s 2.5e-05\nper_token_pair_s 3e-09\n";
  actors::EngineOptions o = small_options();
  o.cost_model_profile = profile;
  {
    auto engine = actors::Engine::create(stories_model(), o);
    REQUIRE(engine.has_value());
    CHECK((*engine)->cost_model().source == "profile " + profile);
    const actors::SchedulerStats stats = run(io, (*engine)->stats());
    CHECK(stats.cost_model.per_token == 2.5e-05);
    CHECK(stats.cost_model.per_token_pair == 3e-09);
    CHECK(actors::describe((*engine)->cost_model()) == "per_token_s 2.5e-05, per_token_pair_s 3e-09 (profile " +
                                                           profile + ")");
  }
  std::ofstream(profile) << "per_token_s 2.5e-05\nper_token_pairs 3e-09\n";
  auto bad = actors::Engine::create(stories_model(), o);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message == "--cost-model: " + profile + ":2: unknown key 'per_token_pairs' (per_token_s, per_token_pair_s)");
}
