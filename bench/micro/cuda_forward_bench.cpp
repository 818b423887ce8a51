// CUDA forward-pass benchmarks on a generated 1B-class model (Llama 3.2 1B
// shape: 16 layers, dim 2048, 32 heads / 8 KV heads, ff 8192, vocab 32000;
// BF16 weights drawn on the device):
//   BM_CudaDecode1B        batch-1 decode (graph replay or eager), tokens/s and
//                          achieved weight bandwidth (matrix bytes per token / time);
//                          compare with BM_CudaCopyBandwidth (paged_attention_bench.cpp).
//   BM_CudaPrefillGemms1B  the prefill's matrix products (2048 tokens) in TFLOP/s;
//                          compare with BM_CublasBf16Rate, cuBLAS's own BF16 rate
//                          on 8192^3 in the same run.
//   BM_CudaPrefill1B       a whole 2048-token prefill, tokens/s.
// Compiled only with CUDA; each skips without a device.
//
//   pensieve-microbench --benchmark_filter='Cuda(Decode|Prefill)|CublasBf16|CudaCopy'
#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/backend/cuda/cublas_gemm.hpp"
#include "gpu/backend/cuda/cuda_forward.hpp"
#include "gpu/kernels/cuda/ops_launch.hpp"

#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <random>

namespace {

using namespace pensieve;
using backend::cuda::CudaForward;
using backend::cuda::CudaKvPool;
using backend::cuda::MemoryBuffer;

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

model::ModelConfig config_1b() {
  model::ModelConfig c;
  c.name = "generated-1b";
  c.n_layers = 16;
  c.dim = 2048;
  c.n_heads = 32;
  c.n_kv_heads = 8;
  c.head_dim = 64;
  c.ff_dim = 8192;
  c.vocab_size = 32000;
  c.max_context = 4096;
  c.rope_theta = 500000.0f;
  c.rope_style = model::RopeStyle::half_split;
  return c;
}

std::vector<std::int32_t> random_tokens(std::size_t n, std::int32_t vocab) {
  std::mt19937_64 rng(3);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = std::int32_t(rng() % std::uint64_t(vocab));
  return t;
}

// Times device work with events around `run`; returns milliseconds.
template <class F>
float time_on_stream(cudaStream_t stream, F&& run, bool& ok) {
  cudaEvent_t start = nullptr, stop = nullptr;
  float ms = 0;
  ok = cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess &&
       cudaEventRecord(start, stream) == cudaSuccess && run() &&
       cudaEventRecord(stop, stream) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess &&
       cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
  if (start != nullptr) (void)cudaEventDestroy(start);
  if (stop != nullptr) (void)cudaEventDestroy(stop);
  return ms;
}

// Decode at batch 1 after a 512-token prompt; arg 0: graphs (1) or eager (0).
void BM_CudaDecode1B(benchmark::State& state) {
  if (!have_device()) return state.SkipWithError("no CUDA device");
  backend::cuda::CudaForwardOptions o;
  o.copy_logits_to_host = false;
  o.max_batch_tokens = 512;
  o.max_logit_rows = 16;
  if (state.range(0) == 0) o.graph_batch_sizes = {};
  auto f = CudaForward::create_random(config_1b(), o, 1);
  if (!f) return state.SkipWithError(f.error().message.c_str());
  CudaForward& fwd = **f;
  auto pool = CudaKvPool::create(fwd.kv_pool_config(64, 32));
  if (!pool) return state.SkipWithError(pool.error().message.c_str());
  std::vector<kv::BlockId> blocks;
  for (std::uint32_t b = 0; b < 64; ++b) blocks.push_back(kv::BlockId{63 - b});
  std::vector<std::int32_t> feed = random_tokens(512, 32000);
  std::int32_t pos = 0;
  const kernels::cuda::DeviceSamplingParams greedy{0.0f, 0, 1.0f, 0.5f};
  auto step = [&]() -> bool {
    const model::PagedSequence seq{feed, pos, blocks, false};
    auto out = fwd.forward_paged(std::span(&seq, 1), *pool);
    if (!out) return false;
    auto next = fwd.sample(std::span(&greedy, 1));
    if (!next) return false;
    pos += std::int32_t(feed.size());
    feed = {(*next)[0]};
    return true;
  };
  for (int warm = 0; warm < 4; ++warm) {  // prefill, warm-up, capture, first replay
    if (!step()) return state.SkipWithError("warm-up forward failed");
  }
  for (auto _ : state) {
    if (!step()) return state.SkipWithError("decode step failed");
  }
  const double tokens = double(state.iterations());
  state.counters["tokens_per_s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.counters["weight_GBps"] =
      benchmark::Counter(tokens * double(fwd.matrix_bytes_per_token()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["weight_MB"] = double(fwd.matrix_bytes_per_token()) / 1e6;
  state.counters["graph_replays"] = double(fwd.stats().graph_replays);
}
BENCHMARK(BM_CudaDecode1B)->ArgName("graphs")->Arg(1)->Arg(0)->Iterations(256)->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Random BF16 device matrices of the given element counts.
struct DeviceMatrices {
  std::vector<MemoryBuffer> buffers;
  bool ok = true;
  explicit DeviceMatrices(std::initializer_list<std::size_t> elems) {
    std::uint64_t seed = 1;
    for (std::size_t n : elems) {
      auto b = MemoryBuffer::create(n * 2);
      if (!b) {
        ok = false;
        return;
      }
      ok = ok && kernels::cuda::launch_fill_uniform(b->data(), kv::KvDType::bf16, std::int64_t(n), seed++,
                                                    0.5f, nullptr) == cudaSuccess;
      buffers.push_back(std::move(*b));
    }
    ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  }
  void* operator[](std::size_t i) const { return buffers[i].data(); }
};

// The prefill's products: per layer QKV, O, gate|up, down, for 2048 tokens
// (one weight set reused by the 16 layers: compute-bound, so the cache barely helps).
void BM_CudaPrefillGemms1B(benchmark::State& state) {
  if (!have_device()) return state.SkipWithError("no CUDA device");
  const model::ModelConfig c = config_1b();
  const std::int64_t t = 2048, d = c.dim, qkv = c.q_dim() + 2 * c.kv_dim(), ff = c.ff_dim;
  DeviceMatrices m({std::size_t(t * ff), std::size_t(qkv * d), std::size_t(d * d), std::size_t(2 * ff * d),
                    std::size_t(d * ff)});
  auto y = MemoryBuffer::create(std::size_t(t * 2 * ff) * 4);
  cudaStream_t stream = nullptr;
  if (!m.ok || !y || cudaStreamCreate(&stream) != cudaSuccess) return state.SkipWithError("cuda setup failed");
  auto ctx = backend::cuda::CublasContext::create(stream);
  if (!ctx) return state.SkipWithError(ctx.error().message.c_str());
  auto gemm = [&](const void* w, std::int64_t out, std::int64_t in) {
    return backend::cuda::gemm_rows(**ctx, {m[0], kv::KvDType::bf16, in, w, std::int32_t(t), std::int32_t(out),
                                            std::int32_t(in), y->data(), kv::KvDType::f32, out, 0.0f})
        .has_value();
  };
  auto pass = [&] {
    bool all = true;
    for (int l = 0; l < c.n_layers; ++l) {
      all = all && gemm(m[1], qkv, d) && gemm(m[2], d, d) && gemm(m[3], 2 * ff, d) && gemm(m[4], d, ff);
    }
    return all;
  };
  bool ok = true;
  (void)time_on_stream(stream, pass, ok);  // warm-up: cuBLAS heuristics, clocks
  for (auto _ : state) {
    const float ms = time_on_stream(stream, pass, ok);
    if (!ok) return state.SkipWithError("gemm failed");
    state.SetIterationTime(double(ms) / 1e3);
  }
  const double flops = 2.0 * double(t) * double(qkv * d + d * d + 2 * ff * d + d * ff) * c.n_layers;
  state.counters["TFLOPs"] = benchmark::Counter(flops * double(state.iterations()) / 1e12, benchmark::Counter::kIsRate);
  ctx->reset();
  (void)cudaStreamDestroy(stream);
}
BENCHMARK(BM_CudaPrefillGemms1B)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);

// cuBLAS's BF16 rate on a large square product (BF16 in and out, F32 accumulate).
void BM_CublasBf16Rate(benchmark::State& state) {
  if (!have_device()) return state.SkipWithError("no CUDA device");
  const std::int64_t n = 8192;
  DeviceMatrices m({std::size_t(n * n), std::size_t(n * n), std::size_t(n * n)});
  cudaStream_t stream = nullptr;
  if (!m.ok || cudaStreamCreate(&stream) != cudaSuccess) return state.SkipWithError("cuda setup failed");
  auto ctx = backend::cuda::CublasContext::create(stream);
  if (!ctx) return state.SkipWithError(ctx.error().message.c_str());
  auto product = [&] {
    return backend::cuda::gemm_rows(**ctx, {m[0], kv::KvDType::bf16, n, m[1], std::int32_t(n), std::int32_t(n),
                                            std::int32_t(n), m[2], kv::KvDType::bf16, n, 0.0f})
        .has_value();
  };
  bool ok = true;
  for (int i = 0; i < 3; ++i) (void)time_on_stream(stream, product, ok);
  for (auto _ : state) {
    const float ms = time_on_stream(stream, product, ok);
    if (!ok) return state.SkipWithError("gemm failed");
    state.SetIterationTime(double(ms) / 1e3);
  }
  state.counters["TFLOPs"] =
      benchmark::Counter(2.0 * double(n * n * n) * double(state.iterations()) / 1e12, benchmark::Counter::kIsRate);
  ctx->reset();
  (void)cudaStreamDestroy(stream);
}
BENCHMARK(BM_CublasBf16Rate)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);

// A whole prefill of 2048 tokens (eager), into an empty cache each time.
void BM_CudaPrefill1B(benchmark::State& state) {
  if (!have_device()) return state.SkipWithError("no CUDA device");
  backend::cuda::CudaForwardOptions o;
  o.copy_logits_to_host = false;
  o.max_batch_tokens = 2048;
  o.max_logit_rows = 16;
  auto f = CudaForward::create_random(config_1b(), o, 2);
  if (!f) return state.SkipWithError(f.error().message.c_str());
  auto pool = CudaKvPool::create((*f)->kv_pool_config(64, 32));
  if (!pool) return state.SkipWithError(pool.error().message.c_str());
  std::vector<kv::BlockId> blocks;
  for (std::uint32_t b = 0; b < 64; ++b) blocks.push_back(kv::BlockId{b});
  const auto prompt = random_tokens(2048, 32000);
  const model::PagedSequence seq{prompt, 0, blocks, false};
  auto run = [&] { return (*f)->forward_paged(std::span(&seq, 1), *pool).has_value(); };
  bool ok = run();  // warm-up
  for (auto _ : state) {
    const float ms = time_on_stream((*f)->stream(), run, ok);
    if (!ok) return state.SkipWithError("prefill failed");
    state.SetIterationTime(double(ms) / 1e3);
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(2048.0 * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CudaPrefill1B)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);

}  // namespace
#endif  // PENSIEVE_HAVE_CUDA
