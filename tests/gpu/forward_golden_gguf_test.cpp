// The CPU forward pass against llama.cpp on a tiny F16 GGUF (tied output,
// GQA, the real Llama vocabulary): see ../shared/golden/README-gguf.md.
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/model_loader.hpp"
#include "tests/shared_data.hpp"
#include "tests/golden_file.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

using namespace pensieve::model;

namespace {

using pensieve::testing::argmax;
using pensieve::testing::GoldenLine;
using pensieve::testing::read_golden;

// Greedy generation (whole prompt as one batch, then one token per step);
// returns the largest top-5 logit difference and checks the tokens.
double check_line(CpuForward& fwd, const GoldenLine& g) {
  auto kv = fwd.make_kv_cache(std::int32_t(g.prompt.size() + g.generated.size()));
  std::vector<std::int32_t> feed = g.prompt, generated;
  std::int32_t pos = 0;
  double worst = 0;
  for (std::size_t step = 0; step < g.generated.size(); ++step) {
    const ForwardSequence seq{feed, pos, &kv};
    auto out = fwd.forward({&seq, 1});
    REQUIRE(out.has_value());
    const auto logits = out->last(0);
    for (const auto& [id, logit] : g.top[step]) {
      worst = std::max(worst, std::fabs(double(logits[std::size_t(id)]) - logit));
    }
    generated.push_back(argmax(logits));
    pos += std::int32_t(feed.size());
    feed = {generated.back()};
  }
  CHECK(generated == g.generated);
  return worst;
}

void check_all(bool round_f16, double tolerance) {
  const auto golden = read_golden(pensieve::testing::shared_file("golden/tiny-llama-f16.golden.jsonl"));
  REQUIRE(golden.size() == 5);
  auto weights = load_model(pensieve::testing::shared_file("models/tiny-llama-f16.gguf"));
  REQUIRE(weights.has_value());
  CpuForwardOptions opt;
  opt.n_threads = 2;
  opt.round_f16_activations = round_f16;
  auto fwd = CpuForward::create(std::move(*weights), opt);
  REQUIRE(fwd.has_value());
  for (std::size_t line = 0; line < golden.size(); ++line) {
    INFO("golden line " << line);
    const double worst = check_line(*fwd, golden[line]);
    INFO("largest top-5 logit difference " << worst);
    CHECK(worst <= tolerance);
  }
}

}  // namespace

TEST_CASE("tiny-llama-f16 greedy output matches llama.cpp and logits are within 0.05 when "
          "activations are rounded to F16 as ggml does", "[forward]") {
  check_all(true, 0.05);
}

TEST_CASE("tiny-llama-f16 greedy output matches llama.cpp and logits are within 0.2 in plain F32",
          "[forward]") {
  check_all(false, 0.2);
}
