// Paged attention micro-benchmarks. CPU: paged vs contiguous attention of
// the same shapes (the cost of the block-table indirection), and a prefill
// span plus decode rows in one call vs two calls. CUDA (when compiled in and
// a GPU is present): decode attention bandwidth per decode strategy and for
// the adaptive plan, and prefill attention FLOP/s.
//
//   pensieve-microbench --benchmark_filter='Attention' --benchmark_format=json
#include "gpu/kernels/cpu/attention_contiguous.hpp"
#include "gpu/kernels/cpu/attention_pool_runner.hpp"
#include "gpu/kernels/cpu/paged_attention.hpp"
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/formats/half.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/kernels/cuda/paged_attention_cuda.hpp"

#include <cuda_runtime_api.h>
#endif

namespace {

using namespace pensieve;
using namespace pensieve::kernels;

// A batch of sequences with the same shape: n_seqs x (context, q_len), model
// shape (n_heads, n_kv_heads, head_dim), K/V both paged (shuffled blocks) and
// contiguous with equal values.
struct AttentionInputs {
  std::int32_t n_heads, n_kv_heads, head_dim, block_tokens = 32, max_blocks = 0;
  std::vector<std::int32_t> q_start, context;
  std::vector<std::int64_t> kv_start;
  std::vector<std::int32_t> table;
  std::vector<float> q, out, k, v;
  std::unique_ptr<kv::KvPool> pool;

  AttentionInputs(std::vector<std::int32_t> ctx, std::vector<std::int32_t> q_lens,
                  std::int32_t heads, std::int32_t kv_heads, std::int32_t hd,
                  kv::KvDType dtype = kv::KvDType::f32)
      : n_heads(heads), n_kv_heads(kv_heads), head_dim(hd), context(std::move(ctx)) {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const auto n = std::int32_t(context.size());
    const std::int64_t row = std::int64_t(kv_heads) * hd;
    q_start.assign(1, 0);
    kv_start.assign(1, 0);
    std::int32_t blocks = 0;
    for (std::int32_t s = 0; s < n; ++s) {
      q_start.push_back(q_start.back() + q_lens[s]);
      kv_start.push_back(kv_start.back() + context[s]);
      max_blocks = std::max(max_blocks, (context[s] + block_tokens - 1) / block_tokens);
      blocks += (context[s] + block_tokens - 1) / block_tokens;
    }
    std::vector<std::int32_t> physical(std::size_t(blocks), 0);
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), rng);
    kv::KvPoolConfig c;
    c.num_blocks = blocks;
    c.block_tokens = block_tokens;
    c.n_kv_heads = kv_heads;
    c.head_dim = hd;
    c.dtype = dtype;
    pool = std::make_unique<kv::KvPool>(c);
    const kv::PagedKvView view = pool->layer(0);
    k.resize(std::size_t(kv_start.back() * row));
    v.resize(k.size());
    for (auto& x : k) x = u(rng);
    for (auto& x : v) x = u(rng);
    table.assign(std::size_t(n) * std::size_t(max_blocks), 0);
    std::size_t next = 0;
    for (std::int32_t s = 0; s < n; ++s) {
      for (std::int32_t pos = 0; pos < context[s]; ++pos) {
        if (pos % block_tokens == 0)
          table[std::size_t(s) * max_blocks + pos / block_tokens] = physical[next++];
        const std::int32_t block = table[std::size_t(s) * max_blocks + pos / block_tokens];
        for (int which = 0; which < 2; ++which) {
          const float* src = (which == 0 ? k : v).data() + (kv_start[s] + pos) * row;
          const std::int64_t dst = view.offset(block, which, pos % block_tokens, 0);
          for (std::int64_t i = 0; i < row; ++i) {
            if (dtype == kv::KvDType::f32)
              static_cast<float*>(view.data)[dst + i] = src[i];
            else
              static_cast<std::uint16_t*>(view.data)[dst + i] = f32_to_f16(src[i]);
          }
        }
      }
    }
    q.resize(std::size_t(q_start.back()) * std::size_t(heads) * std::size_t(hd));
    for (auto& x : q) x = u(rng);
    out.resize(q.size());
  }

  PagedAttentionParams paged() {
    PagedAttentionParams p;
    p.q = q.data();
    p.out = out.data();
    p.kv = pool->layer(0);
    p.q_start = q_start.data();
    p.context_tokens = context.data();
    p.block_table = table.data();
    p.max_blocks_per_seq = max_blocks;
    p.num_seqs = std::int32_t(context.size());
    p.n_heads = n_heads;
    p.softmax_scale = 1.0f / std::sqrt(float(head_dim));
    return p;
  }

  cpu::ContiguousAttentionParams contiguous() {
    cpu::ContiguousAttentionParams p;
    p.q = q.data();
    p.out = out.data();
    p.k = k.data();
    p.v = v.data();
    p.kv_start = kv_start.data();
    p.q_start = q_start.data();
    p.context_tokens = context.data();
    p.num_seqs = std::int32_t(context.size());
    p.n_heads = n_heads;
    p.n_kv_heads = n_kv_heads;
    p.head_dim = head_dim;
    p.softmax_scale = 1.0f / std::sqrt(float(head_dim));
    return p;
  }

  AttentionPlan plan(std::int32_t workers) const {
    AttentionPlanOptions o;
    o.workers = workers;
    return plan_paged_attention({q_start, context}, n_kv_heads, o).value();
  }

  // K/V bytes read once per KV head group (what a memory-bound kernel moves).
  double kv_bytes(kv::KvDType dtype) const {
    return double(kv_start.back()) * 2.0 * n_kv_heads * head_dim *
           double(kv::kv_dtype_bytes(dtype));
  }
};

std::size_t bench_threads() {
  return cpu::default_thread_count();
}

// Args: sequences, context tokens, new tokens per sequence, paged (1) or contiguous (0).
void BM_CpuAttention(benchmark::State& state) {
  const auto n = std::int32_t(state.range(0)), ctx = std::int32_t(state.range(1)),
             q_len = std::int32_t(state.range(2));
  const bool paged = state.range(3) != 0;
  AttentionInputs in(std::vector<std::int32_t>(std::size_t(n), ctx),
                     std::vector<std::int32_t>(std::size_t(n), q_len), 32, 8, 128);
  cpu::ThreadPool threads(bench_threads(), 0.0);
  cpu::ThreadPoolRunner pool(threads);
  const AttentionPlan plan = in.plan(pool.workers());
  cpu::AttentionWorkspace ws;
  for (auto _ : state) {
    if (paged)
      cpu::paged_attention(in.paged(), plan, ws, pool);
    else
      cpu::contiguous_attention(in.contiguous(), plan, ws, pool);
    benchmark::DoNotOptimize(in.out.data());
  }
  state.SetLabel(paged ? "paged" : "contiguous");
  state.counters["kv_GBps"] =
      benchmark::Counter(in.kv_bytes(kv::KvDType::f32) * double(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CpuAttention)
    ->ArgNames({"seqs", "ctx", "new", "paged"})
    ->Args({16, 2048, 1, 1})
    ->Args({16, 2048, 1, 0})
    ->Args({1, 8192, 1, 1})
    ->Args({1, 8192, 1, 0})
    ->Args({1, 2048, 512, 1})
    ->Args({1, 2048, 512, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Evicts [p, p + bytes) from every cache level.
void flush_lines(const void* p, std::size_t bytes) {
#if defined(__x86_64__)
  const auto* b = static_cast<const char*>(p);
  for (std::size_t i = 0; i < bytes; i += 64) __builtin_ia32_clflush(b + i);
  __builtin_ia32_mfence();
#else
  (void)p, (void)bytes;
#endif
}

// M-100's decode step (12 heads over 4 KV heads of 64): one new token for
// each of `seqs` sequences over `ctx` cached ones in the server's paged F16
// pool, two threads. Args: sequences, context tokens, cold (0: hot, all in
// the caches; 1: a 64 MiB read between calls, untimed, which evicts the
// code, the plan and the page tables too; 2: only the KV pool's lines
// flushed between calls, the rest hot, as in a decode step, where the whole
// model's weights (M-100: 65-200 MB) stream through the L3 between a layer's
// attention and the same layer's in the next step, while the code and the
// plan serve every layer).
void BM_CpuAttentionM100Decode(benchmark::State& state) {
  const auto n = std::int32_t(state.range(0)), ctx = std::int32_t(state.range(1));
  const bool cold = state.range(2) == 1, kv_cold = state.range(2) == 2;
#if !defined(__x86_64__)
  if (kv_cold) {
    state.SkipWithError("skipped: the KV-only flush uses x86's clflush");
    return;
  }
#endif
  AttentionInputs in(std::vector<std::int32_t>(std::size_t(n), ctx),
                     std::vector<std::int32_t>(std::size_t(n), 1), 12, 4, 64, kv::KvDType::f16);
  cpu::ThreadPool threads(2, 0.0);
  cpu::ThreadPoolRunner pool(threads);
  const AttentionPlan plan = in.plan(pool.workers());
  cpu::AttentionWorkspace ws;
  std::vector<float> flush(cold ? (std::size_t(64) << 20) / sizeof(float) : 0, 1.0f);
  for (auto _ : state) {
    if (cold) {
      // Read by both threads, so the worker is spinning, not asleep, when
      // the timed call starts (as between a step's layers).
      state.PauseTiming();
      threads.parallel_for(2, [&](std::size_t b, std::size_t e, std::size_t) {
        float part = 0;
        const std::size_t half = flush.size() / 2;
        for (std::size_t i = b * half; i < e * half; i += 16) part += flush[i];
        benchmark::DoNotOptimize(part);
      });
      state.ResumeTiming();
    }
    if (kv_cold) {
      state.PauseTiming();
      flush_lines(in.pool->layer(0).data, in.pool->layer_bytes());
      state.ResumeTiming();
    }
    cpu::paged_attention(in.paged(), plan, ws, pool);
    benchmark::DoNotOptimize(in.out.data());
  }
  state.SetLabel(plan.decode.describe());
  state.counters["kv_GBps"] =
      benchmark::Counter(in.kv_bytes(kv::KvDType::f16) * double(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CpuAttentionM100Decode)
    ->ArgNames({"seqs", "ctx", "cold"})
    ->ArgsProduct({{1, 8}, {64, 256, 1024}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// One prefill span (512 new over 1536 cached) and 15 decode rows at 2048:
// one call for the whole batch (1) or one call for the prefill and one for the decodes (0).
void BM_CpuAttentionMixedBatch(benchmark::State& state) {
  const bool one_call = state.range(0) != 0;
  std::vector<std::int32_t> ctx(16, 2048), q_lens(16, 1);
  q_lens[0] = 512;
  AttentionInputs all(ctx, q_lens, 32, 8, 128);
  AttentionInputs prefill({2048}, {512}, 32, 8, 128);
  AttentionInputs decode(std::vector<std::int32_t>(15, 2048), std::vector<std::int32_t>(15, 1), 32,
                         8, 128);
  cpu::ThreadPool threads(bench_threads(), 0.0);
  cpu::ThreadPoolRunner pool(threads);
  const AttentionPlan p_all = all.plan(pool.workers()), p_prefill = prefill.plan(pool.workers()),
                      p_decode = decode.plan(pool.workers());
  cpu::AttentionWorkspace ws;
  for (auto _ : state) {
    if (one_call) {
      cpu::paged_attention(all.paged(), p_all, ws, pool);
    } else {
      cpu::paged_attention(prefill.paged(), p_prefill, ws, pool);
      cpu::paged_attention(decode.paged(), p_decode, ws, pool);
    }
    benchmark::DoNotOptimize(all.out.data());
  }
  state.SetLabel(one_call ? "one call" : "two calls");
}
BENCHMARK(BM_CpuAttentionMixedBatch)
    ->ArgName("one_call")
    ->Arg(1)
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The three decode strategies (0 per_sequence, 1 split_kv, 2 packed) and the chooser (3) on the
// CPU.
void BM_CpuDecodePlan(benchmark::State& state) {
  const auto strategy = std::int32_t(state.range(0));
  const auto shape = std::int32_t(state.range(1));  // 0: one long sequence, 1: mixed lengths
  std::vector<std::int32_t> ctx =
      shape == 0 ? std::vector<std::int32_t>{16384} : std::vector<std::int32_t>(31, 256);
  if (shape == 1) ctx.push_back(16384);
  AttentionInputs in(ctx, std::vector<std::int32_t>(ctx.size(), 1), 32, 8, 128);
  cpu::ThreadPool threads(bench_threads(), 0.0);
  cpu::ThreadPoolRunner pool(threads);
  AttentionPlanOptions o;
  o.workers = pool.workers();
  if (strategy == 0) o.decode = DecodePlanChoice{DecodeStrategy::per_sequence, 1, 0};
  if (strategy == 1) o.decode = DecodePlanChoice{DecodeStrategy::split_kv, 4 * pool.workers(), 0};
  if (strategy == 2) o.decode = DecodePlanChoice{DecodeStrategy::packed, 1, 16};
  const AttentionPlan plan =
      plan_paged_attention({in.q_start, in.context}, in.n_kv_heads, o).value();
  cpu::AttentionWorkspace ws;
  for (auto _ : state) {
    cpu::paged_attention(in.paged(), plan, ws, pool);
    benchmark::DoNotOptimize(in.out.data());
  }
  state.SetLabel(strategy == 3 ? "adaptive: " + plan.decode.describe() : plan.decode.describe());
}
BENCHMARK(BM_CpuDecodePlan)
    ->ArgNames({"strategy", "shape"})
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#ifdef PENSIEVE_HAVE_CUDA
bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Device copies of an AttentionInputs batch with an F16 cache.
struct DeviceBatch {
  std::vector<void*> owned;
  PagedAttentionParams p;
  void* upload(const void* src, std::size_t bytes) {
    void* d = nullptr;
    if (cudaMalloc(&d, std::max<std::size_t>(bytes, 1)) != cudaSuccess) return nullptr;
    owned.push_back(d);
    if (src != nullptr && cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
      return nullptr;
    return d;
  }
  explicit DeviceBatch(AttentionInputs& in) {
    p = in.paged();
    std::vector<std::uint16_t> q16(in.q.size());
    std::transform(in.q.begin(), in.q.end(), q16.begin(), f32_to_f16);
    p.q_dtype = kv::KvDType::f16;
    p.q = upload(q16.data(), q16.size() * 2);
    p.out = upload(nullptr, q16.size() * 2);
    p.kv.data = upload(in.pool->layer(0).data, in.pool->layer_bytes());
    p.q_start = static_cast<const std::int32_t*>(upload(in.q_start.data(), in.q_start.size() * 4));
    p.context_tokens =
        static_cast<const std::int32_t*>(upload(in.context.data(), in.context.size() * 4));
    p.block_table = static_cast<const std::int32_t*>(upload(in.table.data(), in.table.size() * 4));
  }
  bool ok() const {
    return std::find(owned.begin(), owned.end(), nullptr) == owned.end() && owned.size() == 6;
  }
  ~DeviceBatch() {
    for (void* d : owned) (void)cudaFree(d);
  }
};

// Times `iterations` runs with events; reports device time per run.
void run_cuda_bench(benchmark::State& state, AttentionInputs& in, const AttentionPlan& plan,
                    double flops) {
  if (!have_gpu()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  DeviceBatch dev(in);
  if (!dev.ok()) {
    state.SkipWithError("cudaMalloc failed");
    return;
  }
  cuda::AttentionDeviceWorkspace ws;
  cudaEvent_t start, stop;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    state.SkipWithError("cudaEventCreate failed");
    return;
  }
  if (!cuda::paged_attention(dev.p, plan, ws, nullptr))
    state.SkipWithError("launch failed");  // warm-up
  for (auto _ : state) {
    (void)cudaEventRecord(start, nullptr);
    auto ran = cuda::paged_attention(dev.p, plan, ws, nullptr);
    (void)cudaEventRecord(stop, nullptr);
    float ms = 0;
    if (!ran || cudaEventSynchronize(stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      state.SkipWithError("cuda paged_attention failed");
      break;
    }
    state.SetIterationTime(double(ms) / 1e3);
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  state.counters["kv_GBps"] =
      benchmark::Counter(in.kv_bytes(kv::KvDType::f16) * double(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  state.counters["TFLOPs"] =
      benchmark::Counter(flops * double(state.iterations()) / 1e12, benchmark::Counter::kIsRate);
}

// Decode: strategy (0 per_sequence, 1 split_kv, 2 packed, 3 adaptive) x (sequences, context).
void BM_CudaDecodeAttention(benchmark::State& state) {
  const auto strategy = std::int32_t(state.range(0)), n = std::int32_t(state.range(1)),
             ctx = std::int32_t(state.range(2));
  std::vector<std::int32_t> contexts(std::size_t(n), ctx);
  if (state.range(3) != 0) {  // mixed: every fourth sequence 8x longer
    for (std::size_t s = 0; s < contexts.size(); s += 4) contexts[s] = ctx * 8;
  }
  AttentionInputs in(contexts, std::vector<std::int32_t>(contexts.size(), 1), 32, 8, 128,
                     kv::KvDType::f16);
  int sms = 132;
  (void)cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  AttentionPlanOptions o;
  o.workers = sms;
  if (strategy == 0) o.decode = DecodePlanChoice{DecodeStrategy::per_sequence, 1, 0};
  if (strategy == 1)
    o.decode = DecodePlanChoice{DecodeStrategy::split_kv, std::max(2, 4 * sms / (n * 8)), 0};
  if (strategy == 2) o.decode = DecodePlanChoice{DecodeStrategy::packed, 1, 4};
  const AttentionPlan plan =
      plan_paged_attention({in.q_start, in.context}, in.n_kv_heads, o).value();
  state.SetLabel(plan.decode.describe());
  run_cuda_bench(state, in, plan, 4.0 * double(in.kv_start.back()) * in.n_heads * in.head_dim);
}
BENCHMARK(BM_CudaDecodeAttention)
    ->ArgNames({"strategy", "seqs", "ctx", "mixed"})
    ->ArgsProduct({{0, 1, 2, 3}, {1}, {32768}, {0}})
    ->ArgsProduct({{0, 1, 2, 3}, {8}, {8192}, {0}})
    ->ArgsProduct({{0, 1, 2, 3}, {64}, {1024}, {0}})
    ->ArgsProduct({{0, 1, 2, 3}, {32}, {512}, {1}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Device-to-device copy of 1 GiB: the bandwidth decode attention is measured against.
void BM_CudaCopyBandwidth(benchmark::State& state) {
  if (!have_gpu()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const std::size_t bytes = std::size_t(1) << 30;
  void *src = nullptr, *dst = nullptr;
  cudaEvent_t start, stop;
  if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess ||
      cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    state.SkipWithError("cuda setup failed");
    return;
  }
  for (auto _ : state) {
    (void)cudaEventRecord(start, nullptr);
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr);
    (void)cudaEventRecord(stop, nullptr);
    float ms = 0;
    if (e != cudaSuccess || cudaEventSynchronize(stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      state.SkipWithError("copy failed");
      break;
    }
    state.SetIterationTime(double(ms) / 1e3);
  }
  // A copy reads and writes every byte.
  state.counters["GBps"] = benchmark::Counter(
      2.0 * double(bytes) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  (void)cudaFree(src);
  (void)cudaFree(dst);
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
}
BENCHMARK(BM_CudaCopyBandwidth)->UseManualTime()->Unit(benchmark::kMillisecond);

// Prefill: one sequence, `new` tokens over `ctx` total.
void BM_CudaPrefillAttention(benchmark::State& state) {
  const auto ctx = std::int32_t(state.range(0)), q_len = std::int32_t(state.range(1));
  AttentionInputs in({ctx}, {q_len}, 32, 8, 128, kv::KvDType::f16);
  const AttentionPlan plan = in.plan(132);
  const double pairs =
      double(q_len) * (double(ctx) - double(q_len) / 2.0);  // causal (row, key) pairs
  run_cuda_bench(state, in, plan, 4.0 * pairs * in.n_heads * in.head_dim);
}
BENCHMARK(BM_CudaPrefillAttention)
    ->ArgNames({"ctx", "new"})
    ->Args({4096, 4096})
    ->Args({8192, 512})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
#endif

}  // namespace
