// A traced engine run records what pensieve-trace needs: every actor's
// message spans, the scheduler's iterations with their batch composition, the
// compute stream's forward passes, and each request's lifecycle and phases
// under its own flow id.
#include "runtime/trace.hpp"
#include "runtime/trace_names.hpp"
#include "tests/actors/engine_fixture.hpp"

#include <set>

using namespace pensieve;
using namespace pensieve::testing;
namespace names = pensieve::rt::trace_names;

TEST_CASE("a traced run records actor messages, iterations, stream work and request phases", "[engine][trace]") {
  rt::Tracer tracer;
  tracer.enable();
  {
    asio::io_context io;
    actors::EngineOptions o;
    o.n_threads = 1;
    o.kv_cache_mb = 16;
    o.tracer = &tracer;
    auto engine = actors::Engine::create(stories_model(), o);
    REQUIRE(engine.has_value());
    auto records = play_all(**engine, io, {{"Hello there", "and again"}}, 6, false);
    REQUIRE(records.size() == 1);
  }
  const auto spans = tracer.drain();
  std::set<std::string> actors;
  std::map<std::uint64_t, std::set<std::string>> phases;  // flow id -> phase and point names
  int iterations = 0, forward = 0;
  for (const auto& s : spans) {
    CHECK(s.end_ns >= s.start_ns);
    if (s.kind == rt::SpanKind::message) actors.insert(s.actor);
    if (s.kind == rt::SpanKind::iteration) {
      ++iterations;
      CHECK(s.actor == names::scheduler);
      CHECK_THAT(s.detail, Catch::Contains("prefill=") && Catch::Contains("decode="));
    }
    if (s.kind == rt::SpanKind::stream && s.actor == names::compute_stream && s.name == "forward") ++forward;
    if (s.kind == rt::SpanKind::request) {
      CHECK(s.flow_id != 0);
      phases[s.flow_id].insert(s.name);
    }
  }
  CHECK(actors.count("conversation") == 1);
  CHECK(actors.count("scheduler") == 1);
  CHECK(actors.count("gpu worker") == 1);
  CHECK(iterations >= 12);  // two turns of six tokens at least
  CHECK(forward == iterations);
  REQUIRE(phases.size() == 2);  // two turns
  for (const auto& [flow, names_seen] : phases) {
    INFO("turn " << flow);
    for (auto n : {names::request_arrival, names::request_first_token, names::request_done, names::phase_queue,
                   names::phase_prefill, names::phase_decode}) {
      CHECK(names_seen.count(std::string(n)) == 1);
    }
  }
}
