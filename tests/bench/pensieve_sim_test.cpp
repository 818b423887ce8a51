// pensieve-sim drives the server's own SchedulerCore on a modelled device:
// the same seed gives the same bytes; the core counts the iterations the
// simulator ran; the stateless policy reuses nothing while the stateful
// ones reuse history; and on the paper's setting (a 13B model on one A100)
// Pensieve's policy serves more turns than recomputing every turn.
#include "bench/pensieve-sim/sim_runner.hpp"
#include "bench/pensieve-sim/iteration_cost.hpp"
#include "bench/pensieve-sim/simulator.hpp"
#include "gpu/model/model_loader.hpp"
#include "tests/shared_data.hpp"

#include <catch2/catch.hpp>

#include <type_traits>

using namespace pensieve;

namespace {

sim::CliOptions small_run(const std::string& data) {
  sim::CliOptions o;
  o.device = "a100-80gb";
  o.model = "llama-2-13b";
  o.data = data;
  o.max_conversations = 60;
  o.rates = {2.0};
  o.think_s = 5;
  o.seed = 7;
  return o;
}

const sim::SimResult& of(const sim::SimRun& run, sim::Policy p) {
  for (const auto& r : run.results) {
    if (r.policy == p) return r;
  }
  FAIL("no result for " << sim::policy_name(p));
  return run.results.front();
}

}  // namespace

TEST_CASE("pensieve-sim: the same seed gives the same output bytes, another seed other arrivals", "[sim]") {
  const std::string data = testing::shared_file("data/sharegpt.jsonl").string();
  sim::CliOptions o = small_run(data);
  auto a = sim::run_sweep(o);
  REQUIRE(a.has_value());
  auto b = sim::run_sweep(o);
  REQUIRE(b.has_value());
  CHECK(sim::render_json(*a) == sim::render_json(*b));
  CHECK(sim::render_table(*a) == sim::render_table(*b));
  o.seed = 8;
  auto c = sim::run_sweep(o);
  REQUIRE(c.has_value());
  CHECK(sim::render_json(*a) != sim::render_json(*c));
  CHECK(sim::render_table(*a).rfind("SIMULATED (pensieve-sim, not measured): device NVIDIA A100-SXM4-80GB", 0) == 0);
}

TEST_CASE("pensieve-sim runs the server's SchedulerCore: its counts are the simulation's", "[sim]") {
  const std::string data = testing::shared_file("data/sharegpt.jsonl").string();
  // The simulator is built on the class the scheduler actor runs.
  static_assert(std::is_same_v<decltype(actors::SchedulerCore(actors::SchedulerOptions{}, actors::KvCacheSizes{})),
                               actors::SchedulerCore>);
  auto run = sim::run_sweep(small_run(data));
  REQUIRE(run.has_value());
  for (const sim::SimResult& r : run->results) {
    INFO(sim::policy_name(r.policy));
    CHECK(r.failed_turns == 0);
    CHECK(r.turns > 100);
    // Every planned, non-empty iteration is one the core counted (empty
    // plans are counted by the core too, so it has at least as many).
    CHECK(r.scheduler_iterations >= r.iterations);
    CHECK(r.iterations > 0);
    // What was computed and what was reused make up every prompt (a turn's
    // last prompt token may be fed with its first decode).
    CHECK(r.prefill_tokens + std::int64_t(r.turns) >= r.prompt_tokens - r.reused_tokens);
  }
  const sim::SimResult& stateless = of(*run, sim::Policy::stateless);
  const sim::SimResult& pensieve = of(*run, sim::Policy::pensieve);
  CHECK(stateless.reused_tokens == 0);
  CHECK(pensieve.reused_tokens > pensieve.prompt_tokens / 2);  // multi-turn history is most of each prompt
  CHECK(pensieve.prefill_tokens < stateless.prefill_tokens / 2);
}

TEST_CASE("pensieve-sim on a 13B model and one A100: Pensieve serves more turns than the stateless baseline",
          "[sim]") {
  const std::string data = testing::shared_file("data/sharegpt.jsonl").string();
  sim::CliOptions o = small_run(data);
  o.max_conversations = 200;  // enough that the served rate is the server's, not the trace's tail
  o.think_s = 10;
  o.policy = "pensieve";
  o.rates = {8.0};  // past the stateless server's capacity
  auto p = sim::run_sweep(o);
  REQUIRE(p.has_value());
  o.policy = "stateless";
  auto s = sim::run_sweep(o);
  REQUIRE(s.has_value());
  const double ratio = p->results[0].throughput_turns_s / s->results[0].throughput_turns_s;
  INFO("pensieve " << p->results[0].throughput_turns_s << " turns/s, stateless " << s->results[0].throughput_turns_s);
  CHECK(ratio > 1.1);
  CHECK(p->results[0].mean_normalized_latency_s < s->results[0].mean_normalized_latency_s);
}

TEST_CASE("pensieve-sim's roofline: decode is bandwidth-bound, prefill compute-bound, swap-in overlaps by layer",
          "[sim]") {
  auto d = sim::load_device_model("a100-80gb");
  REQUIRE(d.has_value());
  auto m = sim::model_preset("llama-2-13b");
  REQUIRE(m.has_value());
  // 13B parameters in FP16: ~26 GB of weights.
  CHECK(m->weight_bytes() == Approx(26.0e9).epsilon(0.03));
  CHECK(m->kv_bytes_per_token() == 2.0 * 40 * 40 * 128 * 2);
  const std::vector<sim::BatchRow> decode{{1000, 1}};
  const auto dc = sim::iteration_cost(*d, *m, 1, decode, 0);
  CHECK(dc.bytes_s > dc.flops_s);
  // ~26 GB of weights and 1001 tokens of KV at 80% of 2039 GB/s: ~16 ms.
  CHECK(dc.total_s ==
        Approx((m->weight_bytes() + 1001 * m->kv_bytes_per_token()) / (2039e9 * 0.8) + 40e-6).epsilon(1e-9));
  const std::vector<sim::BatchRow> prefill{{0, 2048}};
  const auto pc = sim::iteration_cost(*d, *m, 1, prefill, 0);
  CHECK(pc.flops_s > pc.bytes_s);
  // A swap-in shorter than the compute costs only its first layer's copy.
  const auto with_swap = sim::iteration_cost(*d, *m, 1, prefill, 100e6);
  CHECK(with_swap.total_s == Approx(pc.total_s + 100e6 / 25e9 / 40).epsilon(1e-9));
  // Tensor parallelism divides the roofline and adds all-reduces.
  const auto tp4 = sim::iteration_cost(*d, *m, 4, decode, 0);
  CHECK(tp4.compute_s == Approx(dc.compute_s / 4));
  CHECK(tp4.comm_s > 0);
}

TEST_CASE("pensieve-sim refuses a bad device file or model by name", "[sim]") {
  auto bad = sim::parse_device_model(R"({"name": "x", "hbm_gbs": 1})", "x.json");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message == "x.json: unknown key 'hbm_gbs'");
  auto unnamed = sim::parse_device_model(R"({"hbm_gbps": 1})", "y.json");
  REQUIRE_FALSE(unnamed.has_value());
  CHECK(unnamed.error().message == "y.json: a device needs a 'name'");
  CHECK_FALSE(sim::load_model_shape("gpt-5").has_value());
  auto too_big = sim::capacity(*sim::load_device_model("a100-80gb"), *sim::model_preset("llama-2-70b"), sim::SimOptions{});
  REQUIRE_FALSE(too_big.has_value());  // 140 GB of weights on one 80 GB device
  sim::SimOptions tp4;
  tp4.tp = 4;
  CHECK(sim::capacity(*sim::load_device_model("a100-80gb"), *sim::model_preset("llama-2-70b"), tp4).has_value());
  CHECK_FALSE(sim::parse_cli({"--data"}).has_value());
  CHECK(sim::parse_cli({"--rate", "-1", "--data", "x"}).error().message == "--rate: '-1' is not a non-negative number");
}

TEST_CASE("pensieve-sim reads a model's shape from a GGUF file's metadata as the loader does", "[sim]") {
  const std::string path = testing::shared_file("models/tiny-llama-f16.gguf").string();
  auto shape = sim::load_model_shape(path);
  REQUIRE(shape.has_value());
  auto weights = model::load_model(path);
  REQUIRE(weights.has_value());
  const model::ModelConfig& c = weights->config;
  CHECK(shape->n_layers == c.n_layers);
  CHECK(shape->dim == c.dim);
  CHECK(shape->n_heads == c.n_heads);
  CHECK(shape->n_kv_heads == c.n_kv_heads);
  CHECK(shape->head_dim == c.head_dim);
  CHECK(shape->ff_dim == c.ff_dim);
  CHECK(shape->vocab == c.vocab_size);
  CHECK(shape->max_context == c.max_context);
}

TEST_CASE("pensieve-sim repeats the data's conversations, as new ones, when asked for more than it holds", "[sim]") {
  const std::string data = testing::shared_file("data/oasst.jsonl").string();
  auto all = sim::load_workload(data, {});
  REQUIRE(all.has_value());
  const std::size_t n = all->conversations.size();
  sim::WorkloadOptions more;
  more.max_conversations = 2 * n + 3;
  auto w = sim::load_workload(data, more);
  REQUIRE(w.has_value());
  REQUIRE(w->conversations.size() == 2 * n + 3);
  for (std::size_t i : {std::size_t(0), std::size_t(2), n - 1}) {
    REQUIRE(w->conversations[n + i].turns.size() == all->conversations[i].turns.size());
    CHECK(w->conversations[n + i].turns.front().user_tokens == all->conversations[i].turns.front().user_tokens);
    CHECK(w->conversations[2 * n + 2].turns.back().output_tokens == all->conversations[2].turns.back().output_tokens);
  }
  CHECK(w->turns() == 2 * all->turns() + all->conversations[0].turns.size() + all->conversations[1].turns.size() +
                          all->conversations[2].turns.size());
}

TEST_CASE("pensieve-sim delays each turn by the device's front half: its TTFT, not what it computes",
          "[sim]") {
  auto shape = sim::model_preset("llama-2-13b");
  REQUIRE(shape.has_value());
  auto device = sim::load_device_model("a100-80gb");
  REQUIRE(device.has_value());
  // Two conversations of two turns, the second arriving while the first's
  // reply runs: the delay also moves where it joins the batch.
  sim::Workload w;
  for (double start : {0.0, 0.05}) {
    sim::SimConversation c;
    c.start_s = start;
    c.turns = {{40, 6, -1}, {20, 4, 0.01}};
    w.conversations.push_back(c);
  }
  sim::SimOptions o;
  o.policy = sim::Policy::pensieve;
  o.host_gb = 0;
  o.record_turns = true;
  auto without = sim::simulate(w, *device, *shape, o);
  REQUIRE(without.has_value());
  device->turn_start_us = 2500;
  auto with = sim::simulate(w, *device, *shape, o);
  REQUIRE(with.has_value());
  REQUIRE(with->turns == 4);
  REQUIRE(without->turns == 4);
  CHECK(with->prefill_tokens == without->prefill_tokens);
  // The first turn is alone: exactly the delay more. The others also
  // depend on where the delayed arrival meets the running batch.
  const auto first = [](const sim::SimResult& r) {
    for (const auto& t : r.turn_timings) {
      if (t.conversation == 0 && t.turn == 0) return t;
    }
    FAIL("no first turn");
    return r.turn_timings.front();
  };
  CHECK(first(*with).ttft_s - first(*without).ttft_s == Approx(0.0025).margin(1e-9));
  CHECK(first(*with).arrival_s == first(*without).arrival_s);
  // A later turn's delay may hide in its wait for the iteration in flight.
  CHECK(with->ttft_mean_s > without->ttft_mean_s + 0.001);
}
