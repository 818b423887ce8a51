// Decode batches against their ceilings, one thread: the core's FMA peak and
// int8 dot-product peak (independent chains of the widest FMA / VNNI
// instruction this build has), and matmul() on M-100's gate/up shape
// (2048 x 768) for 1-64 tokens per weight type, with the weights in the
// cache (one matrix, re-read) or streamed from DRAM (a 256 MiB ring on
// 2 MiB pages, as CpuForward holds them). Rates are per CPU second, robust to
// a shared machine; each row reports GFLOP/s and the weight bytes read per
// second, so a row is a share of either ceiling (bench/README.md).
#include "bench/common/fma_peak.hpp"
#include "bench/common/int8_dot_peak.hpp"
#include "gpu/formats/half.hpp"
#include "gpu/formats/quant_block_check.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/kernels/cpu/prefetch.hpp"
#include "gpu/kernels/cpu/q8_matmul.hpp"
#include "gpu/kernels/cpu/quant_matmul.hpp"
#include "gpu/model/weight_arena.hpp"

#include <benchmark/benchmark.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;

// The one-thread peaks, through the loops model-bench measures them with
// (bench/common): 1024 steps of every chain a call.
constexpr long peak_steps = 1024;

void BM_FmaPeak(benchmark::State& state) {
  namespace fp = pensieve::bench::fma_peak_detail;
  for (auto _ : state) benchmark::DoNotOptimize(fp::run_chains(peak_steps));
  state.counters["GFLOP/s"] =
      benchmark::Counter(fp::ops_per_step() * peak_steps * double(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate);
#if defined(__AVX512F__)
  state.SetLabel("avx512 zmm fma");
#elif defined(__AVX2__) && defined(__FMA__)
  state.SetLabel("avx2 ymm fma");
#else
  state.SetLabel("scalar fma");
#endif
}
BENCHMARK(BM_FmaPeak);

// vpdpbusd: 4 u8 x s8 products summed into each int32 lane (2 ops each).
void BM_Int8DotPeak(benchmark::State& state) {
#if defined(__AVX512VNNI__)
  namespace ip = pensieve::bench::int8_peak_detail;
  for (auto _ : state) benchmark::DoNotOptimize(ip::run_chains(peak_steps));
  state.counters["GOP/s"] = benchmark::Counter(
      ip::ops_per_step() * peak_steps * double(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel("avx512-vnni zmm vpdpbusd");
#else
  state.SkipWithError("skipped: this build has no AVX-512 VNNI");
#endif
}
BENCHMARK(BM_Int8DotPeak);

// `count` matrices of rows x cols on 2 MiB pages: normal values for the
// float types, random quants with small finite scales for the blocks.
class BatchRing {
 public:
  BatchRing(DType t, std::int64_t rows, std::int64_t cols, std::size_t count)
      : dtype_(t), rows_(rows), cols_(cols), row_bytes_(pensieve::model::dtype_row_bytes(t, cols)),
        matrix_bytes_(row_bytes_ * std::size_t(rows)), count_(count) {
    auto arena = pensieve::model::WeightArena::create(matrix_bytes_ * count);
    if (!arena) std::abort();
    arena_ = std::move(*arena);
    // One matrix of random contents, copied: the copies sit at other
    // addresses, which is all a DRAM stream needs, and filling 256 MiB with
    // normals would dominate the run.
    std::byte* p = arena_->data();
    const std::size_t n = matrix_bytes_;
    std::mt19937 rng(3);
    if (pensieve::model::dtype_block_elems(t) == 1) {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      const std::size_t elem = t == DType::f32 ? 4 : 2;
      for (std::size_t i = 0; i < n / elem; ++i) {
        const float v = normal(rng);
        const std::uint16_t h = t == DType::f16 ? pensieve::f32_to_f16(v) : pensieve::f32_to_bf16(v);
        if (t == DType::f32) std::memcpy(p + 4 * i, &v, 4);
        else std::memcpy(p + 2 * i, &h, 2);
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) p[i] = std::byte(rng() & 0xff);
      const std::size_t block = pensieve::model::dtype_block_bytes(t);
      for (std::size_t b = 0; b < n / block; ++b)
        for (std::size_t off : pensieve::model::quant_block_f16_fields(t)) {
          const std::uint16_t h = pensieve::f32_to_f16(0.001f + 0.01f * float(rng() % 100) / 100.0f);
          std::memcpy(p + b * block + off, &h, 2);
        }
    }
    for (std::size_t i = 1; i < count; ++i) std::memcpy(p + i * n, p, n);
  }
  kc::WeightView view(std::size_t i) const {
    return {dtype_, arena_->data() + (i % count_) * matrix_bytes_, rows_, cols_, row_bytes_};
  }
  std::size_t matrix_bytes() const { return matrix_bytes_; }

 private:
  DType dtype_;
  std::int64_t rows_, cols_;
  std::size_t row_bytes_, matrix_bytes_, count_;
  std::shared_ptr<pensieve::model::WeightArena> arena_;
};

// One thread's `tokens` x 768 activations against 2048 x 768 weights of
// `dtype` (one matrix, from the caches, or a 256 MiB ring, from DRAM), each
// iteration through run(x, w, y, pool, scratch); GFLOP/s and weight GB/s.
template <class Run>
void run_batch(benchmark::State& state, DType dtype, std::int64_t tokens, bool dram,
               const Run& run) {
  const std::int64_t rows = 2048, cols = 768;
  const std::size_t matrix_bytes = pensieve::model::dtype_row_bytes(dtype, cols) * rows;
  BatchRing ring(dtype, rows, cols, dram ? (std::size_t(256) << 20) / matrix_bytes + 1 : 1);
  kc::ThreadPool pool(1);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(std::size_t(tokens * cols)), y(std::size_t(tokens * rows)), scratch;
  for (auto& v : x) v = normal(rng);
  std::size_t i = 0;
  for (auto _ : state) {
    run(kc::ConstRowsView(x.data(), tokens, cols, cols), ring.view(i++),
        kc::RowsView{y.data(), tokens, rows, rows}, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  const double n = double(state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(tokens * rows * cols) * n * 1e-9, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(double(matrix_bytes) * n * 1e-9, benchmark::Counter::kIsRate);
}

// args: dtype, tokens, source (0: one matrix, from the caches; 1: DRAM).
void BM_MatmulBatch(benchmark::State& state) {
  const auto dtype = DType(state.range(0));
  const bool dram = state.range(2) != 0;
  run_batch(state, dtype, state.range(1), dram,
            [](auto x, const kc::WeightView& w, auto y, kc::ThreadPool& pool, auto& scratch) {
              kc::matmul({}, x, w, y, pool, scratch);
            });
  state.SetLabel(std::string(pensieve::model::dtype_name(dtype)) + (dram ? " dram" : " cached") +
                 " " + kc::matmul_path_name(kc::MatmulPath::best));
}
BENCHMARK(BM_MatmulBatch)
    ->ArgsProduct({{int(DType::f32), int(DType::f16), int(DType::bf16), int(DType::q8_0),
                    int(DType::q4_k), int(DType::q6_k)},
                   {1, 2, 4, 8, 16, 32, 64},
                   {0, 1}});

// K-quant batches by tiles, in one binary: args dtype, tokens, tiles (0: the
// best, the 16-row lane tiles where the CPU has them and their panels above
// 8 tokens, the other types' panels at any count; 1: the 8-row token tiles,
// one dot per element for the types without; 2: the lane tiles without
// panels), source as BM_MatmulBatch's.
void BM_KQuantBatch(benchmark::State& state) {
  const auto dtype = DType(state.range(0));
  const auto tiles = kc::QuantBatchTiles(state.range(2));
  const bool dram = state.range(3) != 0;
  if (!kc::quant_dot_lane_panel_fn(dtype, kc::QuantDotPath::best, kc::PrefetchInto::l2)) {
    state.SkipWithError("skipped: this CPU has no lane tiles or panels");
    return;
  }
  run_batch(state, dtype, state.range(1), dram,
            [tiles](auto x, const kc::WeightView& w, auto y, kc::ThreadPool& pool, auto& scratch) {
              kc::quant_matmul(x, w, y, pool, scratch, kc::QuantDotPath::best, tiles);
            });
  state.SetLabel(std::string(pensieve::model::dtype_name(dtype)) +
                 (tiles == kc::QuantBatchTiles::best         ? " best"
                  : tiles == kc::QuantBatchTiles::lane_tiles ? " lane-tiles"
                                                             : " token-tiles") +
                 (dram ? " dram" : " cached"));
}
BENCHMARK(BM_KQuantBatch)
    ->ArgsProduct({{int(DType::q4_0), int(DType::q4_1), int(DType::q5_0), int(DType::q5_1),
                    int(DType::iq4_nl), int(DType::q2_k), int(DType::q3_k), int(DType::q4_k),
                    int(DType::q5_k), int(DType::q6_k), int(DType::iq4_xs)},
                   {2, 4, 8, 16, 32, 64},
                   {0, 1, 2},
                   {0, 1}});

// The lane tiles (1 to 8 tokens) and panels (more) of the K-quants with
// their prefetch of the next tile side by side in one binary (which is
// fastest depends on the core: cpu_tuning.hpp). args: dtype, tokens,
// prefetch (0: into the L1, 1: the L2, 2: the L1 by quant groups, which the
// panels take as 0), source as BM_MatmulBatch's.
void BM_LanePrefetch(benchmark::State& state) {
  const auto dtype = DType(state.range(0));
  const auto prefetch = kc::PrefetchInto(state.range(2));
  const bool dram = state.range(3) != 0;
  if (!kc::quant_dot_lane_tile_fn(dtype, kc::QuantDotPath::best, prefetch)) {
    state.SkipWithError("skipped: this CPU has no lane tiles");
    return;
  }
  const kc::CpuTuning tuning{"bench", kc::KQuantTypes::all(), prefetch, prefetch};
  run_batch(state, dtype, state.range(1), dram,
            [&tuning](auto x, const kc::WeightView& w, auto y, kc::ThreadPool& pool, auto& scratch) {
              kc::quant_matmul(x, w, y, pool, scratch, kc::QuantDotPath::best,
                               kc::QuantBatchTiles::best, tuning);
            });
  state.SetLabel(std::string(pensieve::model::dtype_name(dtype)) + " " +
                 kc::prefetch_into_name(prefetch) + (dram ? " dram" : " cached"));
}
BENCHMARK(BM_LanePrefetch)
    ->ArgsProduct({{int(DType::q4_k), int(DType::q5_k), int(DType::q6_k), int(DType::iq4_xs)},
                   {1, 2, 8, 64},
                   {0, 1, 2},
                   {0, 1}});

// What quant_matmul ran for a Q8_0 decode batch on AVX2 before its token
// tile: one AVX2 dot per element, 16 rows for every token before the next
// 16, the first token's pass asking for the row 4 ahead.
void avx2_dots(const kc::ConstRowsView& x, const kc::WeightView& w, const kc::RowsView& y,
               std::vector<float>& scratch) {
  const kc::QuantActs acts = kc::quantize_act_rows(kc::ActQuant::q8_0, x, scratch);
  const kc::QuantDotFn dot = kc::quant_dot_fn(DType::q8_0, kc::QuantDotPath::avx2);
  const std::int64_t nb = w.cols / 32;
  for (std::int64_t o0 = 0; o0 < w.rows; o0 += 16) {
    for (std::int64_t t = 0; t < x.rows; ++t) {
      const kc::QuantActRow xr = acts.row(t);
      for (std::int64_t o = o0; o < std::min(w.rows, o0 + 16); ++o) {
        if (t == 0 && o + 4 < w.rows)
          for (std::size_t off = 0; off < w.row_bytes; off += 64)
            kc::prefetch_l2(w.row(o + 4) + off);
        y.row(t)[o] = dot(w.row(o), xr, nb);
      }
    }
  }
}

// Q8_0 decode batches by path, in one binary: args tokens, path, source as
// BM_MatmulBatch's. Paths: 0 best (the VNNI token tiles), 2 per_token (each
// token through the one-token tile, as before them), 1 portable; and the
// AVX2 path of a CPU without VNNI: 3 its token tile (quant_matmul), 4 one
// AVX2 dot per element (as before that tile).
constexpr int q8_avx2_tiles = 3, q8_avx2_dots = 4;

void BM_Q8Batch(benchmark::State& state) {
  const std::int64_t rows = 2048, cols = 768, tokens = state.range(0);
  const int path_arg = int(state.range(1));
  const auto path = kc::Q8Path(path_arg);
  const bool dram = state.range(2) != 0;
  const bool avx2 = path_arg == q8_avx2_tiles || path_arg == q8_avx2_dots;
  if (avx2 ? !kc::quant_dot_token_tile_fn(DType::q8_0, kc::QuantDotPath::avx2)
           : path != kc::Q8Path::portable && !kc::q8_vnni_available()) {
    state.SkipWithError("skipped: this CPU lacks the path");
    return;
  }
  const std::size_t matrix_bytes = pensieve::model::dtype_row_bytes(DType::q8_0, cols) * rows;
  BatchRing ring(DType::q8_0, rows, cols, dram ? (std::size_t(256) << 20) / matrix_bytes + 1 : 1);
  kc::ThreadPool pool(1);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(std::size_t(tokens * cols)), y(std::size_t(tokens * rows)), scratch;
  for (auto& v : x) v = normal(rng);
  std::size_t i = 0;
  for (auto _ : state) {
    const kc::ConstRowsView xv(x.data(), tokens, cols, cols);
    const kc::RowsView yv{y.data(), tokens, rows, rows};
    if (path_arg == q8_avx2_tiles)
      kc::quant_matmul(xv, ring.view(i++), yv, pool, scratch, kc::QuantDotPath::avx2);
    else if (path_arg == q8_avx2_dots)
      avx2_dots(xv, ring.view(i++), yv, scratch);
    else
      kc::q8_matmul(xv, ring.view(i++), yv, pool, scratch, path);
    benchmark::DoNotOptimize(y.data());
  }
  const double n = double(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(tokens * rows * cols) * n * 1e-9,
                                                 benchmark::Counter::kIsRate);
  state.counters["GB/s"] =
      benchmark::Counter(double(matrix_bytes) * n * 1e-9, benchmark::Counter::kIsRate);
  const char* names[] = {"best", "portable", "per_token", "avx2-tiles", "avx2-dots"};
  state.SetLabel(std::string(names[path_arg]) + (dram ? " dram" : " cached"));
}
BENCHMARK(BM_Q8Batch)->ArgsProduct({{1, 2, 4, 8, 16, 32, 64}, {0, 2, 3, 4}, {0, 1}});

}  // namespace
