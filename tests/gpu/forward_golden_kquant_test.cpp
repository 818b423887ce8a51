// The CPU forward pass against llama.cpp on the quantised kq-* GGUF files
// (Q4_K_M, Q6_K, Q8_0 and Q4_0 mixes of one random model): teacher-forced,
// as ../shared/golden/README-gguf.md prescribes. The steps of a line are the
// logits at positions len(prompt) - 1 ... of one pass over prompt +
// generated[:23] (the kernels are batch invariant, so each row is what a
// pass over prompt + generated[:i] gives at its last position).
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/model_loader.hpp"
#include "tests/golden_file.hpp"
#include "tests/shared_data.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace pensieve::model;

namespace {

using pensieve::testing::argmax;
using pensieve::testing::GoldenLine;
using pensieve::testing::read_golden;

struct Agreement {
  std::size_t steps = 0, argmax_equal = 0;
  double worst = 0;                // largest top-5 logit difference
  std::vector<double> step_worst;  // per step, for the median
  double median() {
    std::sort(step_worst.begin(), step_worst.end());
    return step_worst.empty() ? 0 : step_worst[step_worst.size() / 2];
  }
};

void teacher_force(CpuForward& fwd, const GoldenLine& g, Agreement& a) {
  std::vector<std::int32_t> tokens = g.prompt;
  tokens.insert(tokens.end(), g.generated.begin(), g.generated.end() - 1);
  auto kv = fwd.make_kv_cache(std::int32_t(tokens.size()));
  const ForwardSequence seq{tokens, 0, &kv, true};
  auto out = fwd.forward({&seq, 1});
  REQUIRE(out.has_value());
  const auto vocab = std::size_t(out->vocab_size);
  for (std::size_t step = 0; step < g.generated.size(); ++step) {
    const std::size_t row = g.prompt.size() - 1 + step;
    const std::span<const float> logits(out->logits.data() + row * vocab, vocab);
    double worst = 0;
    for (const auto& [id, logit] : g.top[step]) {
      worst = std::max(worst, std::fabs(double(logits[std::size_t(id)]) - logit));
    }
    a.step_worst.push_back(worst);
    a.worst = std::max(a.worst, worst);
    a.argmax_equal += argmax(logits) == g.generated[step];
    ++a.steps;
  }
}

Agreement agreement(const std::string& name, bool float_activations) {
  const auto golden =
      read_golden(pensieve::testing::shared_file("golden/" + name + ".golden.jsonl"));
  REQUIRE(golden.size() == 5);
  auto weights = load_model(pensieve::testing::shared_file("models/" + name + ".gguf"));
  REQUIRE(weights.has_value());
  CpuForwardOptions opt;
  opt.n_threads = 2;
  opt.float_activations = float_activations;
  opt.log_weight_placement = false;
  auto fwd = CpuForward::create(std::move(*weights), opt);
  REQUIRE(fwd.has_value());
  Agreement a;
  for (const GoldenLine& g : golden) teacher_force(*fwd, g, a);
  REQUIRE(a.steps == 120);
  return a;
}

// README-gguf.md's bound for an engine that quantises activations as ggml.
void check_ggml_numerics(const std::string& name) {
  Agreement a = agreement(name, false);
  INFO(name << ": argmax agrees at " << a.argmax_equal << "/" << a.steps
            << " steps, largest top-5 difference " << a.worst << ", median per step "
            << a.median());
  CHECK(double(a.argmax_equal) >= 0.97 * double(a.steps));
  CHECK(a.worst <= 5.0);
}

}  // namespace

TEST_CASE(
    "kq-q4_k_m teacher-forced with ggml's activation rounding: argmax at 97% of steps, top-5 "
    "within 5",
    "[forward][kquant]") {
  check_ggml_numerics("kq-q4_k_m");
}

TEST_CASE(
    "kq-q6_k teacher-forced with ggml's activation rounding: argmax at 97% of steps, top-5 within "
    "5",
    "[forward][kquant]") {
  check_ggml_numerics("kq-q6_k");
}

TEST_CASE(
    "kq-q8_0 teacher-forced with ggml's activation rounding: argmax at 97% of steps, top-5 within "
    "5",
    "[forward][kquant]") {
  check_ggml_numerics("kq-q8_0");
}

TEST_CASE(
    "kq-q4_0 teacher-forced with ggml's activation rounding: argmax at 97% of steps, top-5 within "
    "5",
    "[forward][kquant]") {
  check_ggml_numerics("kq-q4_0");
}

TEST_CASE("kq-* teacher-forced on float activations stay within README-gguf.md's float bounds",
          "[forward][kquant]") {
  for (const char* name : {"kq-q4_k_m", "kq-q6_k", "kq-q8_0", "kq-q4_0"}) {
    Agreement a = agreement(name, true);
    const double median = a.median();
    INFO(name << ": argmax agrees at " << a.argmax_equal << "/" << a.steps
              << ", largest top-5 difference " << a.worst << ", median per step " << median);
    CHECK(double(a.argmax_equal) >= 0.85 * double(a.steps));
    CHECK(a.worst <= 25.0);
    CHECK(median < 5.0);
  }
}
