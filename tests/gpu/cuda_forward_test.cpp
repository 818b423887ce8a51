// The CUDA forward pass against the CPU reference: a generated model's logits
// on both backends for prefill, mixed and decode batches (BF16 within 2e-2
// relative of F32), eager and with decode graphs; greedy tokens of
// stories260K against llama2.c's golden output. [gpu]: run from
// tests/gpu/device-checks.sh; exits as SKIPPED (77) without a device.
#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/backend/cuda/cuda_forward.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/llama2c_loader.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "tests/gpu/cuda_test_support.hpp"
#include "tests/temp_dir.hpp"
#include "tests/golden_file.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <random>

using namespace pensieve;
using namespace pensieve::model;
using backend::cuda::CudaForward;
using backend::cuda::CudaForwardStats;
using backend::cuda::CudaForwardOptions;
using backend::cuda::CudaKvPool;

namespace {

using testing::argmax;
using testing::GoldenLine;
using testing::read_golden;

ModelWeights generated_model(const testing::TempDir& dir) {
  TestModelOptions o;
  o.n_layers = 4;
  o.dim = 256;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 688;
  o.vocab_size = 1000;
  o.dtype = DType::f16;
  o.seed = 7;
  o.tied_output = false;
  const auto path = dir / "generated.gguf";
  REQUIRE(make_test_model(o, path).has_value());
  auto w = load_model(path);
  REQUIRE(w.has_value());
  return std::move(*w);
}

std::unique_ptr<CudaForward> cuda_forward(const ModelWeights& w, CudaForwardOptions o) {
  auto f = CudaForward::create(w, std::move(o));
  INFO((f ? std::string() : f.error().message));
  REQUIRE(f.has_value());
  return std::move(*f);
}

CudaKvPool device_pool(const CudaForward& f, std::int32_t blocks, std::int32_t block_tokens) {
  auto p = CudaKvPool::create(f.kv_pool_config(blocks, block_tokens));
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.has_value());
  return std::move(*p);
}

// Worst per-row ||cuda - cpu|| / ||cpu|| over the rows of one output.
double worst_row_error(const ForwardOutput& cuda, const ForwardOutput& cpu) {
  REQUIRE(cuda.rows() == cpu.rows());
  REQUIRE(cuda.row_position == cpu.row_position);
  REQUIRE(cuda.first_row == cpu.first_row);
  double worst = 0;
  for (std::size_t r = 0; r < cpu.rows(); ++r) {
    worst = std::max(worst, testing::norm_rel_error(cuda.row(r).data(), cpu.row(r).data(),
                                                    std::size_t(cpu.vocab_size)));
  }
  return worst;
}

// Runs the same batches on both backends (prefill with all logits, decode
// steps, one mixed step with a prefill chunk) and returns the worst row error.
double compare_backends(const ModelWeights& w, CudaForwardOptions options, CudaForwardStats* stats) {
  auto cpu = CpuForward::create(w, {.n_threads = 2});
  REQUIRE(cpu.has_value());
  auto gpu = cuda_forward(w, std::move(options));
  const std::int32_t block_tokens = 16, num_blocks = 64;
  kv::KvPool cpu_pool(cpu->kv_pool_config(num_blocks, block_tokens, kv::KvDType::f32));
  CudaKvPool gpu_pool = device_pool(*gpu, num_blocks, block_tokens);
  // Physical blocks handed out shuffled, so logical and physical order differ.
  std::vector<std::uint32_t> free_ids(num_blocks);
  std::iota(free_ids.begin(), free_ids.end(), 0u);
  std::shuffle(free_ids.begin(), free_ids.end(), std::mt19937_64(5));
  std::mt19937_64 rng(9);
  const std::vector<std::int32_t> prompt_lengths = {37, 5, 70, 1};
  std::vector<std::vector<std::int32_t>> pending;
  std::vector<std::vector<kv::BlockId>> blocks(prompt_lengths.size());
  std::vector<std::int32_t> pos(prompt_lengths.size(), 0);
  for (std::size_t s = 0; s < prompt_lengths.size(); ++s) {
    std::vector<std::int32_t> p(std::size_t(prompt_lengths[s]));
    for (auto& t : p) t = std::int32_t(rng() % 1000);
    pending.push_back(p);
    for (std::int32_t b = 0; b < 7; ++b) {  // 112 tokens of room
      blocks[s].push_back(kv::BlockId{free_ids.back()});
      free_ids.pop_back();
    }
  }
  double worst = 0;
  for (int step = 0; step < 14; ++step) {
    if (step == 3) {  // a mixed batch: sequence 3 gets a 9-token chunk while the others decode
      for (int i = 0; i < 9; ++i) pending[3].push_back(std::int32_t(rng() % 1000));
    }
    std::vector<PagedSequence> batch;
    for (std::size_t s = 0; s < pending.size(); ++s)
      batch.push_back({pending[s], pos[s], blocks[s], step == 0 && s == 0});
    auto want = cpu->forward_paged(batch, cpu_pool);
    auto got = gpu->forward_paged(batch, gpu_pool);
    REQUIRE(want.has_value());
    INFO((got ? std::string() : got.error().message));
    REQUIRE(got.has_value());
    const double err = worst_row_error(*got, *want);
    INFO("step " << step);
    CHECK(err < 2e-2);
    worst = std::max(worst, err);
    for (std::size_t s = 0; s < pending.size(); ++s) {
      pos[s] += std::int32_t(pending[s].size());
      pending[s] = {argmax(want->last(s))};  // both backends continue from the reference's tokens
    }
  }
  if (stats != nullptr) *stats = gpu->stats();
  return worst;
}

// Greedy tokens of each golden prompt alone (batch 1: decode graphs), sampled
// on the device; returns how many of the first `steps` match per line.
std::vector<int> greedy_matches(kv::KvDType dtype, int steps) {
  auto w = load_llama2c(testing::shared_file("models/stories260K.bin"));
  REQUIRE(w.has_value());
  CudaForwardOptions o;
  o.compute_dtype = dtype;
  o.copy_logits_to_host = false;
  auto gpu = cuda_forward(*w, o);
  const std::int32_t block_tokens = 16;
  CudaKvPool pool = device_pool(*gpu, 32, block_tokens);
  std::vector<kv::BlockId> blocks;
  for (std::uint32_t b = 0; b < 32; ++b) blocks.push_back(kv::BlockId{31 - b});
  std::vector<int> matches;
  for (const GoldenLine& g : read_golden(testing::shared_file("golden/stories260K.golden.jsonl"))) {
    REQUIRE(g.generated.size() >= std::size_t(steps));
    std::vector<std::int32_t> feed = g.prompt, tokens;
    std::int32_t pos = 0;
    for (int step = 0; step < steps; ++step) {
      const PagedSequence seq{feed, pos, blocks, false};
      auto out = gpu->forward_paged(std::span(&seq, 1), pool);
      INFO((out ? std::string() : out.error().message));
      REQUIRE(out.has_value());
      const kernels::cuda::DeviceSamplingParams greedy{0.0f, 0, 1.0f, 0.5f};
      auto next = gpu->sample(std::span(&greedy, 1));
      REQUIRE(next.has_value());
      tokens.push_back((*next)[0]);
      pos += std::int32_t(feed.size());
      feed = {tokens.back()};
    }
    int same = 0;
    while (same < steps && tokens[std::size_t(same)] == g.generated[std::size_t(same)]) ++same;
    matches.push_back(same);
  }
  CHECK(gpu->stats().graph_replays > 0);
  return matches;
}

}  // namespace

TEST_CASE("CUDA forward logits of a generated model are within 2e-2 of the CPU's (BF16 and F16)",
          "[gpu][cuda_forward]") {
  testing::require_cuda_device();
  testing::TempDir dir("cuda-forward");
  const ModelWeights w = generated_model(dir);
  for (kv::KvDType dtype : {kv::KvDType::bf16, kv::KvDType::f16}) {
    CudaForwardOptions o;
    o.compute_dtype = dtype;
    o.graph_batch_sizes = {};  // eager only
    const double err = compare_backends(w, o, nullptr);
    testing::report_metric((std::string("logits_rel_err.eager.") + kv::kv_dtype_name(dtype)).c_str(), err);
  }
}

TEST_CASE("decode batches replay a captured CUDA graph and keep the CPU's logits",
          "[gpu][cuda_forward]") {
  testing::require_cuda_device();
  testing::TempDir dir("cuda-graphs");
  const ModelWeights w = generated_model(dir);
  CudaForwardOptions o;  // BF16, graphs for batch 4 among the defaults
  CudaForwardStats stats;
  const double err = compare_backends(w, o, &stats);
  testing::report_metric("logits_rel_err.graphs.bf16", err);
  // Steps 1 (warm-up) and 3 (mixed) run eagerly, step 2 captures, 4..13 replay.
  CHECK(stats.graph_captures == 1);
  CHECK(stats.graph_replays == 11);
  CHECK(stats.eager_runs == 3);
}

TEST_CASE("a bad batch is an error before anything runs on the device", "[gpu][cuda_forward]") {
  testing::require_cuda_device();
  testing::TempDir dir("cuda-bad");
  const ModelWeights w = generated_model(dir);
  CudaForwardOptions o;
  o.max_batch_tokens = 8;
  auto gpu = cuda_forward(w, o);
  CudaKvPool pool = device_pool(*gpu, 4, 16);
  const std::vector<kv::BlockId> blocks = {kv::BlockId{0}};
  const std::vector<std::int32_t> too_many(9, 1), bad_id = {1000}, ok = {1, 2};
  CHECK_FALSE(gpu->forward_paged(std::vector<PagedSequence>{{too_many, 0, blocks}}, pool).has_value());
  CHECK_FALSE(gpu->forward_paged(std::vector<PagedSequence>{{bad_id, 0, blocks}}, pool).has_value());
  CHECK_FALSE(gpu->forward_paged(std::vector<PagedSequence>{{ok, 15, blocks}}, pool).has_value());
  const std::vector<kv::BlockId> out_of_range = {kv::BlockId{4}};
  CHECK_FALSE(gpu->forward_paged(std::vector<PagedSequence>{{ok, 0, out_of_range}}, pool).has_value());
  auto fine = gpu->forward_paged(std::vector<PagedSequence>{{ok, 0, blocks}}, pool);
  REQUIRE(fine.has_value());
  CHECK(fine->rows() == 1);
}

TEST_CASE("the KV pool sized from free memory and a fraction fits on the device", "[gpu][cuda_forward]") {
  testing::require_cuda_device();
  testing::TempDir dir("cuda-budget");
  const ModelWeights w = generated_model(dir);
  auto gpu = cuda_forward(w, {});
  auto half = gpu->kv_blocks_for_fraction(0.5, 32);
  auto most = gpu->kv_blocks_for_fraction(0.9, 32);
  REQUIRE(half.has_value());
  REQUIRE(most.has_value());
  CHECK(*half > 0);
  CHECK(*most > *half);
  // Half the card's worth of blocks really allocates, and is given back.
  CudaKvPool pool = device_pool(*gpu, *half, 32);
  CHECK(pool.total_bytes() == std::size_t(*half) * 32 * kv::kv_bytes_per_token(pool.config()));
}

TEST_CASE("stories260K greedy tokens on CUDA match llama2.c for the first 32 steps",
          "[gpu][cuda_forward]") {
  testing::require_cuda_device();
  const int steps = 32;
  // F16 is the check: BF16 weights of this tiny model move close logits (the
  // golden's first step differs by 0.1) and is reported, not asserted.
  const auto f16 = greedy_matches(kv::KvDType::f16, steps);
  for (std::size_t line = 0; line < f16.size(); ++line) {
    INFO("golden line " << line);
    CHECK(f16[line] == steps);
  }
  const auto bf16 = greedy_matches(kv::KvDType::bf16, steps);
  testing::report_metric("greedy_steps_matching.f16", *std::min_element(f16.begin(), f16.end()));
  testing::report_metric("greedy_steps_matching.bf16", *std::min_element(bf16.begin(), bf16.end()));
}
#endif  // PENSIEVE_HAVE_CUDA
