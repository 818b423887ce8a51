// Tensor parallelism on the CPU backend: N shards over the host all-reduce
// give the 1-way forward pass's logits (to float rounding: only the order of
// the row-parallel sums differs), greedy stories260K generation still gives
// the golden tokens, and a model that does not split N ways is a clear error.
#include "gpu/model/host_collective.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/llama2c_loader.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "gpu/model/tp_forward.hpp"
#include "gpu/model/tp_shard.hpp"
#include "tests/shared_data.hpp"
#include "tests/golden_file.hpp"
#include "tests/temp_dir.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <unistd.h>

using namespace pensieve;
using namespace pensieve::model;
namespace fs = std::filesystem;

namespace {

using pensieve::testing::TempDir;

using testing::argmax;
using testing::GoldenLine;
using testing::read_golden;

using RunFn = std::function<Result<ForwardOutput>(std::span<const PagedSequence>)>;

constexpr std::int32_t kBlockTokens = 8;
constexpr std::int32_t kBlocksPerSeq = 12;

// Sequence s owns physical blocks [s * per_seq, (s + 1) * per_seq), the
// same ids in every rank's pool.
std::vector<kv::BlockId> blocks_of(std::size_t s, std::int32_t per_seq = kBlocksPerSeq) {
  std::vector<kv::BlockId> b;
  for (std::int32_t j = 0; j < per_seq; ++j) b.push_back(kv::BlockId{std::uint32_t(s * std::size_t(per_seq) + std::size_t(j))});
  return b;
}

// Feeds each token stream in chunks (prefill 5 at a time, then one by one),
// all sequences in every batch, and returns every batch's logits rows.
std::vector<std::vector<float>> run_script(const RunFn& run, const std::vector<std::vector<std::int32_t>>& streams,
                                           std::size_t prompt_tokens) {
  std::vector<std::vector<float>> logits;
  std::vector<std::size_t> pos(streams.size(), 0);
  std::vector<std::vector<kv::BlockId>> blocks;
  for (std::size_t s = 0; s < streams.size(); ++s) blocks.push_back(blocks_of(s));
  for (bool more = true; more;) {
    std::vector<PagedSequence> batch;
    more = false;
    for (std::size_t s = 0; s < streams.size(); ++s) {
      if (pos[s] == streams[s].size()) continue;
      const std::size_t n = std::min(pos[s] < prompt_tokens ? std::size_t(5) : std::size_t(1), streams[s].size() - pos[s]);
      batch.push_back({std::span(streams[s]).subspan(pos[s], n), std::int32_t(pos[s]), blocks[s], true});
      pos[s] += n;
      more = true;
    }
    if (batch.empty()) break;
    auto out = run(batch);
    INFO((out ? std::string() : out.error().message));
    REQUIRE(out.has_value());
    REQUIRE(out->vocab_size > 0);
    logits.push_back(std::move(out->logits));
  }
  return logits;
}

std::vector<kv::KvPool> pools_for(const kv::KvPoolConfig& config, std::int32_t ranks) {
  std::vector<kv::KvPool> pools;
  for (std::int32_t r = 0; r < ranks; ++r) pools.emplace_back(config);
  return pools;
}

std::vector<kv::KvPool*> pointers(std::vector<kv::KvPool>& pools) {
  std::vector<kv::KvPool*> p;
  for (auto& pool : pools) p.push_back(&pool);
  return p;
}

// The largest |a - b| over all batches, relative to the largest |a|.
double relative_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    for (std::size_t j = 0; j < a[i].size(); ++j) {
      diff = std::max(diff, std::fabs(double(a[i][j]) - double(b[i][j])));
      scale = std::max(scale, std::fabs(double(a[i][j])));
    }
  }
  return diff / scale;
}

// The N-way logits of the script against the 1-way logits of the same model.
double tp_vs_single(const ModelWeights& weights, std::int32_t ranks, bool round_f16) {
  const std::vector<std::vector<std::int32_t>> streams = {
      {1, 17, 99, 250, 3, 44, 180, 7, 7, 120, 201, 33, 64, 2, 9, 10, 11},
      {1, 5, 280, 6, 61, 62, 63},
      {1, 300, 2, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165}};
  CpuForwardOptions opt{.n_threads = 1, .round_f16_activations = round_f16};
  auto single = CpuForward::create(weights, opt);
  REQUIRE(single.has_value());
  kv::KvPool pool(single->kv_pool_config(3 * kBlocksPerSeq, kBlockTokens));
  const auto want = run_script([&](auto batch) { return single->forward_paged(batch, pool); }, streams, 9);

  auto tp = TpForward::create(weights, ranks, opt);
  REQUIRE(tp.has_value());
  REQUIRE(tp->ranks() == ranks);
  auto pools = pools_for(tp->kv_pool_config(3 * kBlocksPerSeq, kBlockTokens), ranks);
  auto ptrs = pointers(pools);
  const auto got = run_script([&](auto batch) { return tp->forward_paged(batch, ptrs); }, streams, 9);
  return relative_difference(want, got);
}

TestModelOptions generated(DType dtype, bool tied, std::int32_t ff_dim = 256) {
  TestModelOptions o;
  o.n_layers = 2;
  o.dim = 128;
  o.n_heads = 8;
  o.n_kv_heads = 4;
  o.ff_dim = ff_dim;
  o.dtype = dtype;
  o.seed = 11;
  o.vocab_size = 301;  // not a multiple of 2 or 4: the last rank's logits slice is padded
  o.tied_output = tied;
  return o;
}

ModelWeights load_generated(const TempDir& dir, const TestModelOptions& o, const std::string& name) {
  REQUIRE(make_test_model(o, dir.path() / name).has_value());
  auto w = load_model(dir.path() / name);
  REQUIRE(w.has_value());
  return std::move(*w);
}

ModelWeights stories() {
  auto w = load_llama2c(testing::shared_file("models/stories260K.bin"));
  REQUIRE(w.has_value());
  return std::move(*w);
}

// Greedy decoding of every prompt at once, one ragged batch per step.
std::vector<std::vector<std::int32_t>> generate(const RunFn& run, const std::vector<std::vector<std::int32_t>>& prompts,
                                                std::size_t steps, std::int32_t blocks_per_seq) {
  std::vector<std::vector<std::int32_t>> out(prompts.size()), feed = prompts;
  std::vector<std::int32_t> pos(prompts.size(), 0);
  std::vector<std::vector<kv::BlockId>> blocks;
  for (std::size_t s = 0; s < prompts.size(); ++s) blocks.push_back(blocks_of(s, blocks_per_seq));
  for (std::size_t step = 0; step < steps; ++step) {
    std::vector<PagedSequence> batch;
    for (std::size_t s = 0; s < prompts.size(); ++s) batch.push_back({feed[s], pos[s], blocks[s], false});
    auto result = run(batch);
    INFO((result ? std::string() : result.error().message));
    REQUIRE(result.has_value());
    for (std::size_t s = 0; s < prompts.size(); ++s) {
      out[s].push_back(argmax(result->last(s)));
      pos[s] += std::int32_t(feed[s].size());
      feed[s] = {out[s].back()};
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the host all-reduce adds in rank order and every rank gets the same bits", "[tp]") {
  // 1e8 + -1e8 + 1 is 1 in rank order; any other order loses the 1 (1e8 + 1
  // rounds to 1e8 in float), so the result shows the order.
  model::HostCollectiveGroup group(3);
  const float values[3] = {1e8f, -1e8f, 1.0f};
  std::vector<std::vector<float>> data(3), gathered(3);
  std::vector<std::jthread> threads;
  for (std::int32_t r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      data[std::size_t(r)].assign(1000, values[r]);
      const float mine[2] = {float(r), float(10 * r)};
      gathered[std::size_t(r)].resize(6);
      for (int round = 0; round < 3; ++round) {
        (void)group.rank(r).all_reduce_sum(data[std::size_t(r)].data() + round, 1000 - std::size_t(round) * 2);
      }
      (void)group.rank(r).all_gather(mine, gathered[std::size_t(r)].data(), 2);
    });
  }
  threads.clear();
  for (std::int32_t r = 0; r < 3; ++r) {
    const auto& d = data[std::size_t(r)];
    // Element 0 was reduced once, element 1 twice, elements 2..997 three times:
    // 1 -> 1 * 3 -> 3 * 3.
    CHECK(d[0] == 1.0f);
    CHECK(d[1] == 3.0f);
    CHECK(std::all_of(d.begin() + 2, d.begin() + 998, [](float v) { return v == 9.0f; }));
    CHECK(gathered[std::size_t(r)] == std::vector<float>{0, 0, 1, 10, 2, 20});
    CHECK(group.rank(r).rank() == r);
    CHECK(group.rank(r).ranks() == 3);
  }
}

TEST_CASE("a 2- and 4-way sharded forward gives the 1-way logits of a generated model to float rounding",
          "[tp][forward]") {
  TempDir dir("tp");
  struct Variant { DType dtype; bool tied; const char* name; };
  for (const Variant v : {Variant{DType::f32, true, "f32-tied.gguf"}, Variant{DType::f32, false, "f32-untied.gguf"},
                          Variant{DType::f16, false, "f16.gguf"}, Variant{DType::q8_0, true, "q8.gguf"}}) {
    const ModelWeights w = load_generated(dir, generated(v.dtype, v.tied), v.name);
    for (std::int32_t ranks : {1, 2, 4}) {
      // F16 activations are rounded before each F16 matmul, so a one-ulp
      // difference in a rounded input can show; F32 and Q8_0 differ only by
      // the order of the partial sums.
      const double diff = tp_vs_single(w, ranks, true);
      INFO(v.name << ", " << ranks << " ranks: relative logit difference " << diff);
      if (ranks == 1) {
        CHECK(diff == 0.0);
      } else {
        CHECK(diff < (v.dtype == DType::f16 ? 2e-3 : 1e-5));
      }
    }
  }
}

TEST_CASE("the other architectures' 2-way sharded forward gives their 1-way logits to float rounding",
          "[tp][forward]") {
  TempDir dir("tp");
  for (const char* arch : {"llama3", "qwen3", "mistral", "phi3", "gemma2", "gemma3"}) {
    TestModelOptions o = generated(DType::f32, true);
    o.arch = arch;
    if (std::string(arch) == "qwen3" || std::string(arch).starts_with("gemma")) o.head_dim = 32;
    if (std::string(arch) == "gemma3") o.n_layers = 6;
    const ModelWeights w = load_generated(dir, o, std::string(arch) + ".gguf");
    // Windows (8 tokens) shorter than the script's streams; post-norms after the all-reduce.
    const double diff = tp_vs_single(w, 2, true);
    INFO(arch << ": relative logit difference " << diff);
    CHECK(diff < 1e-5);
  }
}

TEST_CASE("stories260K's 2- and 4-way sharded logits equal its 1-way logits to float rounding", "[tp][forward]") {
  const ModelWeights w = stories();
  for (std::int32_t ranks : {2, 4}) {
    const double diff = tp_vs_single(w, ranks, true);
    INFO(ranks << " ranks: relative logit difference " << diff);
    CHECK(diff < 1e-5);
  }
}

TEST_CASE("a shard holds its heads, its KV heads and its slice of the vocabulary", "[tp]") {
  const ModelWeights w = stories();
  REQUIRE(w.config.n_heads == 8);
  REQUIRE(w.config.n_kv_heads == 4);
  for (std::int32_t ranks : {2, 4}) {
    for (std::int32_t r = 0; r < ranks; ++r) {
      auto s = shard_weights(w, {r, ranks});
      REQUIRE(s.has_value());
      CHECK(s->config.n_heads == 8 / ranks);
      CHECK(s->config.n_kv_heads == 4 / ranks);
      CHECK(s->config.ff_dim == w.config.ff_dim / ranks);
      CHECK(s->config.vocab_size == w.config.vocab_size);
      CHECK(s->output.rows() == w.config.vocab_size / ranks);
      CHECK(s->layers[0].wo.cols() == w.config.q_dim() / ranks);
      CHECK(s->layers[0].w_down.cols() == w.config.ff_dim / ranks);
      // Rank r's Q rows are the full model's rows of its heads: a view.
      CHECK(s->layers[0].wq.data == w.layers[0].wq.data + std::size_t(r) * s->layers[0].wq.size_bytes);
    }
    auto tp = TpForward::create(w, ranks, {.n_threads = 1});
    REQUIRE(tp.has_value());
    const kv::KvPoolConfig pool = tp->kv_pool_config(4, 8);
    CHECK(pool.n_kv_heads == 4 / ranks);
    auto whole = CpuForward::create(w, {.n_threads = 1});
    REQUIRE(whole.has_value());
    CHECK(kv::kv_bytes_per_token(pool) * std::size_t(ranks) ==
          kv::kv_bytes_per_token(whole->kv_pool_config(4, 8)));
  }
}

TEST_CASE("stories260K greedy generation on 2 and 4 ranks gives the golden tokens", "[tp][forward]") {
  const auto golden = read_golden(testing::shared_file("golden/stories260K.golden.jsonl"));
  REQUIRE(golden.size() == 5);
  const ModelWeights w = stories();
  std::vector<std::vector<std::int32_t>> prompts;
  std::size_t steps = 0, longest = 0;
  for (const auto& g : golden) {
    prompts.push_back(g.prompt);
    steps = std::max(steps, g.generated.size());
    longest = std::max(longest, g.prompt.size());
  }
  const auto per_seq = std::int32_t((longest + steps) / kBlockTokens + 1);
  for (std::int32_t ranks : {2, 4}) {
    auto tp = TpForward::create(w, ranks, {.n_threads = 1});
    REQUIRE(tp.has_value());
    auto pools = pools_for(tp->kv_pool_config(std::int32_t(prompts.size()) * per_seq, kBlockTokens), ranks);
    auto ptrs = pointers(pools);
    const auto out = generate([&](auto batch) { return tp->forward_paged(batch, ptrs); }, prompts, steps, per_seq);
    for (std::size_t line = 0; line < golden.size(); ++line) {
      INFO(ranks << " ranks, golden line " << line);
      const auto& want = golden[line].generated;
      CHECK(std::vector<std::int32_t>(out[line].begin(), out[line].begin() + std::ptrdiff_t(want.size())) == want);
    }
  }
}

TEST_CASE("a rank count that does not divide the heads, KV heads or ff_dim is a clear error", "[tp]") {
  const ModelWeights w = stories();  // 8 heads, 4 KV heads
  auto three = TpForward::create(w, 3);
  REQUIRE_FALSE(three.has_value());
  CHECK_THAT(three.error().message, Catch::Contains("n_heads (8)") && Catch::Contains("multiples of 3"));
  auto eight = shard_weights(w, {0, 8});  // 8 heads split, 4 KV heads do not
  REQUIRE_FALSE(eight.has_value());
  CHECK_THAT(eight.error().message, Catch::Contains("n_kv_heads (4)"));
  CHECK_FALSE(TpForward::create(w, 0).has_value());
  CHECK_FALSE(shard_weights(w, {2, 2}).has_value());

  TempDir dir("tp");
  const ModelWeights odd_ff = load_generated(dir, generated(DType::f32, true, 258), "ff.gguf");
  auto four = TpForward::create(odd_ff, 4);
  REQUIRE_FALSE(four.has_value());
  CHECK_THAT(four.error().message, Catch::Contains("ff_dim (258)"));
  // Q8_0 rows split only on whole 32-element blocks.
  const ModelWeights q8 = load_generated(dir, generated(DType::q8_0, true, 192), "q8.gguf");
  auto q8_four = TpForward::create(q8, 4);  // ff 192 / 4 = 48: not whole blocks of 32
  REQUIRE_FALSE(q8_four.has_value());
  CHECK_THAT(q8_four.error().message, Catch::Contains("w_down") && Catch::Contains("whole blocks of 32"));
  CHECK(TpForward::create(q8, 2).has_value());  // 96 = 3 blocks
}

TEST_CASE("a shard without a matching collective, or pools of the wrong layout, are errors before any rank runs",
          "[tp]") {
  const ModelWeights w = stories();
  auto shard = shard_weights(w, {0, 2});
  REQUIRE(shard.has_value());
  CHECK_FALSE(CpuForward::create(*shard, {.n_threads = 1, .tp = {0, 2}}).has_value());
  model::HostCollectiveGroup three(3);
  CHECK_FALSE(CpuForward::create(*shard, {.n_threads = 1, .tp = {0, 2}, .collective = &three.rank(0)}).has_value());

  auto tp = TpForward::create(w, 2, {.n_threads = 1});
  REQUIRE(tp.has_value());
  std::vector<kv::KvPool> pools;
  pools.emplace_back(tp->kv_pool_config(4, 8));
  pools.emplace_back(tp->kv_pool_config(5, 8));
  auto ptrs = pointers(pools);
  const std::vector<std::int32_t> tokens = {1, 2, 3};
  const auto blocks = blocks_of(0);
  const PagedSequence seq{tokens, 0, std::span(blocks).first(1), false};
  CHECK_FALSE(tp->forward_paged(std::span(&seq, 1), ptrs).has_value());
  CHECK_FALSE(tp->forward_paged(std::span(&seq, 1), std::span(ptrs).first(1)).has_value());
  // Same layouts: the batch runs (and a bad token is refused on every rank alike).
  std::vector<kv::KvPool> good = pools_for(tp->kv_pool_config(4, 8), 2);
  auto good_ptrs = pointers(good);
  CHECK(tp->forward_paged(std::span(&seq, 1), good_ptrs).has_value());
  const std::vector<std::int32_t> bad = {1, 512};
  const PagedSequence bad_seq{bad, 0, std::span(blocks).first(1), false};
  CHECK_FALSE(tp->forward_paged(std::span(&bad_seq, 1), good_ptrs).has_value());
}
