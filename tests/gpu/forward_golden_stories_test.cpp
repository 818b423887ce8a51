// The CPU forward pass against llama2.c's run.c on stories260K, and its batch
// invariance: batched, chunked and threaded runs give the same bits.
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/llama2c_loader.hpp"
#include "tests/shared_data.hpp"
#include "tests/golden_file.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace pensieve::model;

namespace {

using pensieve::testing::argmax;
using pensieve::testing::GoldenLine;
using pensieve::testing::read_golden;

struct Run {
  std::vector<std::int32_t> tokens;
  std::vector<std::vector<float>> logits;  // per generated step
};

// Greedy decoding of every prompt at once, as one ragged batch per step.
std::vector<Run> generate(CpuForward& fwd, const std::vector<std::vector<std::int32_t>>& prompts,
                          int steps) {
  std::vector<ContiguousKvCache> caches;
  for (const auto& p : prompts) caches.push_back(fwd.make_kv_cache(std::int32_t(p.size()) + steps));
  std::vector<Run> runs(prompts.size());
  std::vector<std::vector<std::int32_t>> feed = prompts;
  std::vector<std::int32_t> pos(prompts.size(), 0);
  for (int step = 0; step < steps; ++step) {
    std::vector<ForwardSequence> batch;
    for (std::size_t s = 0; s < prompts.size(); ++s) batch.push_back({feed[s], pos[s], &caches[s]});
    auto out = fwd.forward(batch);
    REQUIRE(out.has_value());
    for (std::size_t s = 0; s < prompts.size(); ++s) {
      const auto logits = out->last(s);
      runs[s].logits.emplace_back(logits.begin(), logits.end());
      runs[s].tokens.push_back(argmax(logits));
      pos[s] += std::int32_t(feed[s].size());
      feed[s] = {runs[s].tokens.back()};
    }
  }
  return runs;
}

// With min_parallel_cost 0 every kernel loop goes through the pool, so thread
// counts really change who computes what.
CpuForward stories(std::size_t threads, std::int32_t kv_tile = 32,
                   double min_parallel_cost = pensieve::kernels::cpu::ThreadPool::default_min_parallel_cost) {
  auto w = load_llama2c(pensieve::testing::shared_file("models/stories260K.bin"));
  REQUIRE(w.has_value());
  CpuForwardOptions opt;
  opt.n_threads = threads;
  opt.kv_tile_tokens = kv_tile;
  opt.min_parallel_cost = min_parallel_cost;
  auto f = CpuForward::create(std::move(*w), opt);
  REQUIRE(f.has_value());
  return std::move(*f);
}

bool same_bits(const std::vector<float>& a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("stories260K greedy output and top-5 logits match llama2.c for every golden line",
          "[forward]") {
  const auto golden = read_golden(pensieve::testing::shared_file("golden/stories260K.golden.jsonl"));
  REQUIRE(golden.size() == 5);
  auto fwd = stories(2);
  for (std::size_t line = 0; line < golden.size(); ++line) {
    const auto& g = golden[line];
    const auto run = generate(fwd, {g.prompt}, int(g.generated.size()))[0];
    INFO("golden line " << line);
    CHECK(run.tokens == g.generated);
    double worst = 0;
    for (std::size_t step = 0; step < g.top.size(); ++step) {
      for (const auto& [id, logit] : g.top[step]) {
        worst = std::max(worst, std::fabs(double(run.logits[step][std::size_t(id)]) - logit));
      }
    }
    INFO("largest top-5 logit difference " << worst);
    CHECK(worst <= 1e-4);
  }
}

TEST_CASE("a ragged batch of all golden prompts gives the same tokens and logit bits as one by one",
          "[forward]") {
  const auto golden = read_golden(pensieve::testing::shared_file("golden/stories260K.golden.jsonl"));
  std::vector<std::vector<std::int32_t>> prompts;
  for (const auto& g : golden) prompts.push_back(g.prompt);
  auto fwd = stories(2);
  const auto together = generate(fwd, prompts, 16);
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    const auto alone = generate(fwd, {prompts[s]}, 16)[0];
    INFO("prompt " << s);
    CHECK(alone.tokens == together[s].tokens);
    for (std::size_t step = 0; step < alone.logits.size(); ++step) {
      REQUIRE(same_bits(alone.logits[step], together[s].logits[step]));
    }
  }
}

TEST_CASE("a row's logits are bit-identical alone and in a batch of 7, with 1, 2 or 3 threads",
          "[forward]") {
  const std::vector<std::int32_t> mine = {1, 403, 407, 261, 378, 430, 359};
  std::vector<std::vector<std::int32_t>> others = {
      {1}, {1, 5, 9}, {1, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312},
      {1, 44, 45, 46, 47}, {1, 200, 100}, {1, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
      7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}};
  auto fwd1 = stories(1);
  const auto alone = generate(fwd1, {mine}, 8)[0];
  for (std::size_t threads : {1u, 2u, 3u}) {
    auto fwd = stories(threads, 32, 0.0);
    std::vector<std::vector<std::int32_t>> batch = others;
    batch.insert(batch.begin() + 3, mine);
    REQUIRE(batch.size() == 7);
    const auto together = generate(fwd, batch, 8)[3];
    INFO("threads " << threads);
    CHECK(together.tokens == alone.tokens);
    for (std::size_t step = 0; step < alone.logits.size(); ++step) {
      REQUIRE(same_bits(alone.logits[step], together.logits[step]));
    }
  }
}

TEST_CASE("prefill in several chunks gives the same logit bits as prefill at once", "[forward]") {
  const auto golden = read_golden(pensieve::testing::shared_file("golden/stories260K.golden.jsonl"));
  std::vector<std::int32_t> prompt = golden.back().prompt;
  prompt.insert(prompt.end(), golden.back().generated.begin(), golden.back().generated.end());
  REQUIRE(prompt.size() > 40);
  for (std::int32_t kv_tile : {32, 5}) {
    auto fwd = stories(2, kv_tile, 0.0);
    auto whole_kv = fwd.make_kv_cache(std::int32_t(prompt.size()));
    const ForwardSequence whole{prompt, 0, &whole_kv, true};
    auto at_once = fwd.forward({&whole, 1});
    REQUIRE(at_once.has_value());
    REQUIRE(at_once->rows() == prompt.size());
    auto kv = fwd.make_kv_cache(std::int32_t(prompt.size()));
    const std::size_t cuts[] = {0, 1, 4, 17, 18, prompt.size()};
    for (std::size_t c = 0; c + 1 < std::size(cuts); ++c) {
      const std::span<const std::int32_t> chunk(prompt.data() + cuts[c], cuts[c + 1] - cuts[c]);
      const ForwardSequence part{chunk, std::int32_t(cuts[c]), &kv, true};
      auto out = fwd.forward({&part, 1});
      REQUIRE(out.has_value());
      for (std::size_t i = 0; i < chunk.size(); ++i) {
        const auto expect = at_once->row(cuts[c] + i);
        INFO("kv tile " << kv_tile << " position " << cuts[c] + i);
        REQUIRE(same_bits(std::vector<float>(expect.begin(), expect.end()), out->row(i)));
      }
    }
    CHECK(kv.size_tokens() == std::int32_t(prompt.size()));
  }
}

TEST_CASE("a bad batch is an error that leaves the caches unchanged", "[forward]") {
  auto fwd = stories(1);
  auto kv = fwd.make_kv_cache(4);
  const std::vector<std::int32_t> ok = {1, 2}, bad_id = {1, 512}, too_long = {1, 2, 3, 4, 5};
  const ForwardSequence gap{ok, 1, &kv};
  CHECK_FALSE(fwd.forward({&gap, 1}).has_value());  // start past the cached tokens
  const ForwardSequence id{bad_id, 0, &kv};
  CHECK_FALSE(fwd.forward({&id, 1}).has_value());
  const ForwardSequence overflow{too_long, 0, &kv};
  CHECK_FALSE(fwd.forward({&overflow, 1}).has_value());
  CHECK(kv.size_tokens() == 0);
  const ForwardSequence twice[] = {{ok, 0, &kv}, {ok, 0, &kv}};
  CHECK_FALSE(fwd.forward(twice).has_value());
  const ForwardSequence good{ok, 0, &kv};
  CHECK(fwd.forward({&good, 1}).has_value());
  CHECK(kv.size_tokens() == 2);
}
