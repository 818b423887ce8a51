// quant_matmul decode (one token) per quantised type and QuantDotPath, on
// M-100's gate/up shape (2048 x 768), one thread, in weight bytes per CPU
// second (robust to a shared machine: on 2 busy cores a 2-thread pool's
// wall time measures the scheduler): weights streamed from memory (a ring
// on 2 MiB pages, 1 GiB, larger than the L3, so every iteration reads from
// DRAM) and from the L2 (one 128 x 768 matrix: the kernel's compute rate). A path the CPU lacks is reported as skipped (an error row), never
// timed. Q8_0 also runs the VNNI tiles matmul() takes for it where they are
// built in ("q8-tiles").
#include "gpu/formats/half.hpp"
#include "gpu/formats/quant_block_check.hpp"
#include "gpu/kernels/cpu/prefetch.hpp"
#include "gpu/kernels/cpu/q8_matmul.hpp"
#include "gpu/kernels/cpu/quant_matmul.hpp"
#include "gpu/model/weight_arena.hpp"

#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;

// `count` matrices of rows x cols, back to back on huge pages.
class QuantRing {
 public:
  QuantRing(DType t, std::int64_t rows, std::int64_t cols, std::size_t count)
      : dtype_(t), rows_(rows), cols_(cols),
        row_bytes_(pensieve::model::dtype_row_bytes(t, cols)),
        matrix_bytes_(row_bytes_ * std::size_t(rows)), count_(count) {
    auto arena = pensieve::model::WeightArena::create(matrix_bytes_ * count);
    if (!arena) std::abort();
    arena_ = std::move(*arena);
    std::byte* p = arena_->data();
    std::uint64_t s = 0x9e3779b97f4a7c15ull;
    const std::size_t n = matrix_bytes_ * count;
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
      s += 0x9e3779b97f4a7c15ull;  // splitmix64: fast enough for a GiB
      std::uint64_t z = s;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      std::memcpy(p + i, &z, 8);
    }
    const std::size_t block = pensieve::model::dtype_block_bytes(t);
    std::mt19937 rng(3);
    for (std::size_t b = 0; b < n / block; ++b)
      // Random bytes in the F16 fields would give NaN, infinite and
      // subnormal scales, whose arithmetic runs slower than a real model's.
      for (std::size_t off : pensieve::model::quant_block_f16_fields(t)) {
        const std::uint16_t h = pensieve::f32_to_f16(0.001f + 0.01f * float(rng() % 100) / 100.0f);
        std::memcpy(p + b * block + off, &h, 2);
      }
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

// Path argument: the QuantDotPath values, this one for Q8_0's tiles, and
// this one for the AVX-512 single-row dots one weight row at a time with a
// prefetch 4 rows ahead (what quant_matmul ran for one token before the
// K-quants' 8-row tiles; kept to measure the tiles against, same run).
constexpr int q8_tiles = 100;
constexpr int avx512_single_rows = 101;

std::string path_name(int path) {
  if (path == avx512_single_rows) return "avx512-vnni-single-rows";
  return path == q8_tiles ? "q8-tiles" : kc::quant_dot_path_name(kc::QuantDotPath(path));
}

void single_rows(const kc::ConstRowsView& x, const kc::WeightView& w, const kc::RowsView& y,
                 std::vector<float>& scratch) {
  const kc::QuantActs acts = kc::quantize_act_rows(kc::act_quant_for(w.dtype), x, scratch);
  const kc::QuantDotFn dot = kc::quant_dot_fn(w.dtype, kc::QuantDotPath::avx512);
  const kc::QuantActRow xr = acts.row(0);
  const std::int64_t nb = w.cols / pensieve::model::dtype_block_elems(w.dtype);
  for (std::int64_t o = 0; o < w.rows; ++o) {
    if (o + 4 < w.rows)
      for (std::size_t off = 0; off < w.row_bytes; off += 64) kc::prefetch_l2(w.row(o + 4) + off);
    y.data[o] = dot(w.row(o), xr, nb);
  }
}

// args: dtype, path, ring bytes (MiB; 0: one small matrix that the L2 holds), threads.
void BM_QuantMatmulDecode(benchmark::State& state) {
  const auto dtype = DType(state.range(0));
  const int path = int(state.range(1));
  const bool from_memory = state.range(2) > 0;
  const std::size_t threads = std::size_t(state.range(3));
  state.SetLabel(std::string(pensieve::model::dtype_name(dtype)) + " " + path_name(path) +
                 (from_memory ? " dram" : " l2"));
  const bool supported = path == q8_tiles ? kc::q8_vnni_available()
                         : path == avx512_single_rows
                             ? kc::quant_dot_path_supported(kc::QuantDotPath::avx512)
                             : kc::quant_dot_path_supported(kc::QuantDotPath(path));
  if (!supported) {
    state.SkipWithError("skipped: this CPU (or build) lacks this path");
    return;
  }
  const std::int64_t rows = from_memory ? 2048 : 128, cols = 768;
  const std::size_t matrix_bytes = pensieve::model::dtype_row_bytes(dtype, cols) * rows;
  const std::size_t count =
      from_memory ? (std::size_t(state.range(2)) << 20) / matrix_bytes + 1 : 1;
  QuantRing ring(dtype, rows, cols, count);
  kc::ThreadPool pool(threads);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(cols)), y(static_cast<std::size_t>(rows)), scratch;
  for (auto& v : x) v = normal(rng);
  std::size_t i = 0;
  for (auto _ : state) {
    const kc::ConstRowsView xv(x.data(), 1, cols, cols);
    const kc::RowsView yv{y.data(), 1, rows, rows};
    if (path == q8_tiles)
      kc::q8_matmul(xv, ring.view(i++), yv, pool, scratch);
    else if (path == avx512_single_rows)
      single_rows(xv, ring.view(i++), yv, scratch);
    else
      kc::quant_matmul(xv, ring.view(i++), yv, pool, scratch, kc::QuantDotPath(path));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(matrix_bytes));
}

void decode_args(benchmark::internal::Benchmark* b, std::int64_t mib, std::int64_t threads) {
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl,
                  DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_xs}) {
    for (kc::QuantDotPath p :
         {kc::QuantDotPath::portable, kc::QuantDotPath::avx2, kc::QuantDotPath::avx512})
      b->Args({int(t), int(p), mib, threads});
    if (t == DType::q8_0) b->Args({int(t), q8_tiles, mib, threads});
    if (t == DType::q4_k || t == DType::q5_k || t == DType::q6_k || t == DType::iq4_xs)
      b->Args({int(t), avx512_single_rows, mib, threads});
  }
}

void BM_QuantMatmulDecodeDram(benchmark::State& state) { BM_QuantMatmulDecode(state); }
BENCHMARK(BM_QuantMatmulDecodeDram)->Apply([](benchmark::internal::Benchmark* b) {
  decode_args(b, 1024, 1);
});
void BM_QuantMatmulDecodeL2(benchmark::State& state) { BM_QuantMatmulDecode(state); }
BENCHMARK(BM_QuantMatmulDecodeL2)->Apply([](benchmark::internal::Benchmark* b) {
  decode_args(b, 0, 1);
});

}  // namespace

namespace {

// The activation quantisation every quantised matmul call does first, on one
// thread before the rows are split: one M-100 row (768) per format.
void BM_QuantizeActRow(benchmark::State& state) {
  const auto kind = kc::ActQuant(state.range(0));
  const std::int64_t cols = 768;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(cols)), storage;
  for (auto& v : x) v = normal(rng);
  for (auto _ : state) {
    const kc::QuantActs a =
        kc::quantize_act_rows(kind, kc::ConstRowsView(x.data(), 1, cols, cols), storage);
    benchmark::DoNotOptimize(a.q);
  }
  state.SetLabel(kind == kc::ActQuant::q8_k   ? "q8_k"
                 : kind == kc::ActQuant::q8_1 ? "q8_1"
                                              : "q8_0");
}
BENCHMARK(BM_QuantizeActRow)
    ->Arg(int(kc::ActQuant::q8_0))
    ->Arg(int(kc::ActQuant::q8_1))
    ->Arg(int(kc::ActQuant::q8_k));

}  // namespace
