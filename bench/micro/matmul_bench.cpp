// The CPU matmul kernel on the model-bench shapes, with the forward pass's
// 2-thread pool: decode (one token, weights streamed from memory: a ring of
// matrices larger than the L3 so every iteration reads from DRAM) in bytes/s,
// and prefill (512 tokens) in FLOP/s. Weights live in anonymous memory on
// 4 KiB pages (a plain heap buffer: THP is in madvise mode here), in a file
// mapping (4 KiB pages, as a loaded GGUF) or in a WeightArena (2 MiB pages,
// where CpuForward puts them), to show what the page size costs a
// memory-bound GEMV. The last
// argument picks the kernel: 0 the current one, 1 the baseline of
// matmul_baseline.hpp, so one run compares both under the same load.
#include "bench/common/memory_bandwidth.hpp"
#include "bench/common/quantiles.hpp"
#include "bench/micro/matmul_baseline.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/kernels/cpu/quant_matmul.hpp"
#include "gpu/model/weight_arena.hpp"
#include "gpu/formats/half.hpp"
#include "gpu/formats/quant_block_check.hpp"

#include <benchmark/benchmark.h>

#include <chrono>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace {

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;

// Where a ring's bytes live.
enum class Placement : int { heap = 0, file_mapped = 1, huge_pages = 2 };

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::heap: return " heap-4k";
    case Placement::file_mapped: return " file-mapped";
    case Placement::huge_pages: return " huge-pages";
  }
  return "?";
}

// `count` weight matrices of rows x cols in `dtype`, back to back.
class WeightRing {
 public:
  WeightRing(DType dtype, std::int64_t rows, std::int64_t cols, std::size_t count,
             Placement placement = Placement::heap)
      : dtype_(dtype), rows_(rows), cols_(cols),
        row_bytes_(pensieve::model::dtype_row_bytes(dtype, cols)),
        matrix_bytes_(row_bytes_ * std::size_t(rows)), count_(count) {
    std::vector<std::byte> bytes(matrix_bytes_ * count);
    fill(bytes);
    if (placement == Placement::heap) {
      anon_ = std::move(bytes);
      base_ = anon_.data();
      return;
    }
    if (placement == Placement::huge_pages) {
      auto arena = pensieve::model::WeightArena::create(bytes.size());
      if (!arena) std::abort();
      arena_ = std::move(*arena);
      std::memcpy(arena_->data(), bytes.data(), bytes.size());
      base_ = arena_->data();
      return;
    }
    char path[] = "/tmp/pensieve-matmul-bench-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0 || write(fd, bytes.data(), bytes.size()) != ssize_t(bytes.size())) std::abort();
    void* p = mmap(nullptr, bytes.size(), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    unlink(path);
    if (p == MAP_FAILED) std::abort();
    mapped_ = p;
    base_ = static_cast<const std::byte*>(p);
  }
  ~WeightRing() {
    if (mapped_) munmap(mapped_, matrix_bytes_ * count_);
  }
  WeightRing(const WeightRing&) = delete;
  WeightRing& operator=(const WeightRing&) = delete;

  kc::WeightView view(std::size_t i) const {
    return {dtype_, base_ + (i % count_) * matrix_bytes_, rows_, cols_, row_bytes_};
  }
  std::size_t matrix_bytes() const { return matrix_bytes_; }
  std::size_t count() const { return count_; }

 private:
  // One matrix of random contents, copied: the copies sit at other
  // addresses, which is all a DRAM stream needs (a 1 GiB ring of normals
  // would take seconds to draw).
  void fill(std::vector<std::byte>& bytes) const {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::size_t n = std::size_t(rows_ * cols_);
    if (dtype_ == DType::f32) {
      for (std::size_t i = 0; i < n; ++i) {
        const float v = normal(rng);
        std::memcpy(&bytes[4 * i], &v, 4);
      }
    } else if (dtype_ == DType::f16) {
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t h = pensieve::f32_to_f16(normal(rng));
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    } else if (dtype_ == DType::bf16) {
      for (std::size_t i = 0; i < n; ++i) {
        float v = normal(rng);
        std::uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const auto h = std::uint16_t(bits >> 16);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    } else {  // the block types: random quants, small scales
      const std::size_t block = pensieve::model::dtype_block_bytes(dtype_);
      const std::uint16_t d = pensieve::f32_to_f16(0.01f);
      for (std::size_t b = 0; b < matrix_bytes_ / block; ++b) {
        for (std::size_t j = 0; j < block; ++j) bytes[b * block + j] = std::byte(rng() & 0x7f);
        for (std::size_t off : pensieve::model::quant_block_f16_fields(dtype_))
          std::memcpy(&bytes[b * block + off], &d, 2);
      }
    }
    for (std::size_t i = 1; i < count_; ++i)
      std::memcpy(bytes.data() + i * matrix_bytes_, bytes.data(), matrix_bytes_);
  }

  DType dtype_;
  std::int64_t rows_, cols_;
  std::size_t row_bytes_, matrix_bytes_, count_;
  std::vector<std::byte> anon_;
  std::shared_ptr<pensieve::model::WeightArena> arena_;
  void* mapped_ = nullptr;
  const std::byte* base_ = nullptr;
};

// kernel: 0 the current one, 1 the baseline, 2 (Q8_0 only) the current
// kernel's dequantising Q8_0 path that the int8 one replaced.
void run_kernel(std::int64_t kernel, kc::ConstRowsView x, const kc::WeightView& w, kc::RowsView y,
                kc::ThreadPool& pool, std::vector<float>& scratch) {
  if (kernel == 1) {
    pensieve::bench::baseline::matmul(x, w, y, pool);
  } else {
    kc::MatmulParams params;
    params.dequantize_q8_0 = kernel == 2;
    kc::matmul(params, x, w, y, pool, scratch);
  }
}

const char* kernel_name(std::int64_t arg) {
  return arg == 2 ? " dequantising" : arg ? " baseline" : " new";
}

std::vector<float> random_rows(std::int64_t n) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

// args: dtype, placement, kernel, threads. M-400's w_gate shape (2816 x 1024); the ring
// holds >= 128 MiB so the L3 (32 MiB) never serves it.
void BM_MatmulDecode(benchmark::State& state) {
  const auto dtype = DType(state.range(0));
  const std::int64_t rows = 2816, cols = 1024;
  const std::size_t matrix_bytes = pensieve::model::dtype_row_bytes(dtype, cols) * rows;
  const std::size_t count = (std::size_t(128) << 20) / matrix_bytes + 1;
  const auto placement = Placement(state.range(1));
  WeightRing ring(dtype, rows, cols, count, placement);
  kc::ThreadPool pool(std::size_t(state.range(3)));
  auto x = random_rows(cols);
  std::vector<float> y(rows), scratch;
  std::size_t i = 0;
  for (auto _ : state) {
    run_kernel(state.range(2), kc::ConstRowsView(x.data(), 1, cols, cols), ring.view(i++),
               kc::RowsView{y.data(), 1, rows, rows}, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(matrix_bytes));
  state.SetLabel(std::string(pensieve::model::dtype_name(dtype)) + placement_name(placement) +
                 kernel_name(state.range(2)));
}
// One thread: bytes per CPU second (what a core can stream, robust to a
// shared machine); two: per wall second, the forward pass's setting.
// BF16: the current kernel only (the baseline has no BF16 path).
BENCHMARK(BM_MatmulDecode)
    ->ArgsProduct({{int(DType::f32), int(DType::f16), int(DType::q8_0)}, {0, 1, 2}, {0, 1}, {1}})
    ->ArgsProduct({{int(DType::bf16)}, {0, 1, 2}, {0}, {1}});
void BM_MatmulDecode2Threads(benchmark::State& state) { BM_MatmulDecode(state); }
BENCHMARK(BM_MatmulDecode2Threads)
    ->ArgsProduct({{int(DType::f32), int(DType::f16), int(DType::q8_0)}, {0, 1, 2}, {0, 1}, {2}})
    ->ArgsProduct({{int(DType::bf16)}, {0, 1, 2}, {0}, {2}})
    ->UseRealTime();

// One token against a 1 GiB ring of M-400's gate (2816 x 1024) on 2 MiB pages,
// 2 threads, as BM_ReadCeiling2Threads reads: a 128 MiB ring read as fast as
// 150 GB/s on the AMD VMs, more than their DRAM gives, so the host's caches
// served part of it. args: dtype, and the kernel of a K-quant's token: 0 the
// default path (the CPU's tuning, cpu_tuning.hpp), 1 its 8-row tiles (the
// single-row dots for Q6_K), 2, 3 and 4 its 16-row lane tiles prefetching
// into the L1, the L2 and the L1 by quant groups.
struct DramDecode {
  explicit DramDecode(const benchmark::State& state)
      : dtype(DType(state.range(0))),
        kernel(int(state.range(1))),
        matrix_bytes(pensieve::model::dtype_row_bytes(dtype, cols) * rows),
        ring(dtype, rows, cols, (std::size_t(1) << 30) / matrix_bytes + 1, Placement::huge_pages),
        x(random_rows(cols)),
        y(rows) {}

  // Matrix i of the ring (modulo its count) times the token.
  void run(std::size_t i) {
    const kc::ConstRowsView xv(x.data(), 1, cols, cols);
    const kc::RowsView yv{y.data(), 1, rows, rows};
    if (kernel == 1)
      kc::quant_matmul(xv, ring.view(i), yv, pool, scratch, kc::QuantDotPath::best,
                       kc::QuantBatchTiles::token_tiles);
    else if (kernel >= 2)
      kc::quant_matmul(xv, ring.view(i), yv, pool, scratch, kc::QuantDotPath::best,
                       kc::QuantBatchTiles::lane_tiles,
                       kc::CpuTuning{"bench", kc::KQuantTypes::all(), kc::PrefetchInto(kernel - 2),
                                     kc::PrefetchInto(kernel - 2)});
    else
      run_kernel(0, xv, ring.view(i), yv, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }

  std::string label() const {
    static const char* const kernels[] = {"", " 8-row tiles", " lane tiles into L1",
                                          " lane tiles into L2", " lane tiles into L1 by groups"};
    return std::string(pensieve::model::dtype_name(dtype)) + kernels[kernel];
  }

  static constexpr std::int64_t rows = 2816, cols = 1024;
  DType dtype;
  int kernel;
  std::size_t matrix_bytes;
  WeightRing ring;
  kc::ThreadPool pool{2};
  std::vector<float> x, y, scratch;
};

// The types both DRAM decode benchmarks run: each on the default path, and
// the K-quants Q4_K and Q6_K on their 8-row tiles and lane tiles (each
// prefetch) too.
void dram_decode_types(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::f16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                  DType::iq4_nl, DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k,
                  DType::iq4_xs})
    b->Args({int(t), 0});
  for (int kernel : {1, 2, 3, 4}) {
    b->Args({int(DType::q4_k), kernel});
    b->Args({int(DType::q6_k), kernel});
  }
  // Q5_K and IQ4_XS through both one-token kernels the tunings choose between.
  b->Args({int(DType::q5_k), 1});
  b->Args({int(DType::q5_k), 4});
  b->Args({int(DType::iq4_xs), 1});
  b->Args({int(DType::iq4_xs), 4});
}

// DramDecode interleaved with the ceiling (see there): the share of it each
// type's decode reaches and the types' bytes per second side by side.
void BM_DecodeDram2Threads(benchmark::State& state) {
  DramDecode d(state);
  std::size_t i = 0;
  for (auto _ : state) d.run(i++);
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(d.matrix_bytes));
  state.SetLabel(d.label());
}
BENCHMARK(BM_DecodeDram2Threads)
    ->Apply(dram_decode_types)
    ->Args({int(DType::q5_k), 1})
    ->UseRealTime();

// DramDecode and BM_ReadCeiling2Threads's read back to back in every
// iteration: one sweep of the 1 GiB ring of weights (about 20 ms), then one
// timed read of the probe's 1 GiB, so each pair shares the memory speed of
// its moment. With random interleaving of separate benchmarks the decode and
// the probe medians can come from different minutes: in one such run the
// probe read 100-102 GB/s in its first repetitions and 51-61 later, and the
// ratio of the medians mixed the two (2026-12-06). Counters: "share" is the
// median of the pairs' decode / read ratios, "decode GB/s" and "read GB/s"
// the medians of each.
void BM_DecodeShare2Threads(benchmark::State& state) {
  DramDecode d(state);
  pensieve::bench::ReadBandwidthProbe probe(std::size_t(1) << 30, 2);
  const std::size_t sweep_bytes = d.matrix_bytes * d.ring.count();
  std::vector<double> shares, decodes, reads;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < d.ring.count(); ++i) d.run(i);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double decode = double(sweep_bytes) / seconds / 1e9;
    const double read = probe.measure(1).best_gb_per_s;
    state.SetIterationTime(seconds);
    shares.push_back(decode / read);
    decodes.push_back(decode);
    reads.push_back(read);
  }
  benchmark::DoNotOptimize(probe.checksum());
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(sweep_bytes));
  state.counters["share"] = pensieve::bench::quantiles(shares).p50;
  state.counters["decode GB/s"] = pensieve::bench::quantiles(decodes).p50;
  state.counters["read GB/s"] = pensieve::bench::quantiles(reads).p50;
  state.SetLabel(d.label());
}
BENCHMARK(BM_DecodeShare2Threads)->Apply(dram_decode_types)->Iterations(15)->UseManualTime();

// The read ceiling beside BM_MatmulDecode2Threads: two threads streaming a
// 1 GiB buffer on 2 MiB pages (model-bench's probe: 128 MiB read at 150 GB/s,
// more than DRAM gives, so the host's caches served part), one read a timed
// iteration. Run with --benchmark_repetitions and
// --benchmark_enable_random_interleaving, the decode kernels' GB/s and this
// ceiling alternate, so their medians share the machine's memory speed of
// the moment (it moves up to 2x between minutes on the shared VMs).
void BM_ReadCeiling2Threads(benchmark::State& state) {
  pensieve::bench::ReadBandwidthProbe probe(std::size_t(1) << 30, 2);
  std::size_t bytes = 0;
  for (auto _ : state) {
    const auto r = probe.measure(1);
    bytes = r.buffer_bytes;
    state.SetIterationTime(double(r.buffer_bytes) / (r.best_gb_per_s * 1e9));
  }
  benchmark::DoNotOptimize(probe.checksum());
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(bytes));
}
BENCHMARK(BM_ReadCeiling2Threads)->UseManualTime();

// One token against one matrix, again and again (so from the caches it
// fits), in bytes of weights per second. args: dtype, kernel.
void decode_one_matrix(benchmark::State& state, std::int64_t rows, std::int64_t cols,
                       Placement placement, std::size_t threads) {
  const auto dtype = DType(state.range(0));
  WeightRing ring(dtype, rows, cols, 1, placement);
  kc::ThreadPool pool(threads);
  auto x = random_rows(cols);
  std::vector<float> y(static_cast<std::size_t>(rows)), scratch;
  for (auto _ : state) {
    run_kernel(state.range(1), kc::ConstRowsView(x.data(), 1, cols, cols), ring.view(0),
               kc::RowsView{y.data(), 1, rows, rows}, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(ring.matrix_bytes()));
  state.SetLabel(std::string(pensieve::model::dtype_name(dtype)) + kernel_name(state.range(1)));
}

// The same from the L2 (one 256 x 1024 matrix): the kernel's compute rate
// per core, without memory. args: dtype, kernel.
void BM_MatmulDecodeCached(benchmark::State& state) {
  decode_one_matrix(state, 256, 1024, Placement::heap, 1);
}
BENCHMARK(BM_MatmulDecodeCached)
    ->ArgsProduct({{int(DType::f32), int(DType::f16), int(DType::q8_0)}, {0, 1}})
    ->ArgsProduct({{int(DType::bf16)}, {0}});

// M-tiny's output head (32000 x 256, 32 MB in F32) with 2 threads: a GEMV
// that the 32 MiB L3 mostly serves, between the L2 case above and DRAM.
// args: dtype, kernel.
void BM_MatmulDecodeL3(benchmark::State& state) {
  decode_one_matrix(state, 32000, 256, Placement::huge_pages, 2);
}
BENCHMARK(BM_MatmulDecodeL3)->ArgsProduct({{int(DType::f32), int(DType::f16)}, {0, 1}})->UseRealTime();

// args: dtype, rows, cols, threads, kernel. 512 tokens (the model-bench
// prompt). With one thread the rate is per CPU second (robust to a shared
// machine); with two, per wall second.
void BM_MatmulPrefill(benchmark::State& state) {
  const auto dtype = DType(state.range(0));
  const std::int64_t rows = state.range(1), cols = state.range(2), tokens = 512;
  WeightRing ring(dtype, rows, cols, 1);
  kc::ThreadPool pool(std::size_t(state.range(3)));
  auto x = random_rows(tokens * cols);
  std::vector<float> y(std::size_t(tokens * rows)), scratch;
  for (auto _ : state) {
    run_kernel(state.range(4), kc::ConstRowsView(x.data(), tokens, cols, cols), ring.view(0),
               kc::RowsView{y.data(), tokens, rows, rows}, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * double(tokens * rows * cols) * double(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
  state.SetLabel(std::string(pensieve::model::dtype_name(dtype)) + kernel_name(state.range(4)));
}
void prefill_args(benchmark::internal::Benchmark* b) {
  for (int dtype : {int(DType::f32), int(DType::f16), int(DType::q8_0)})
    for (int kernel : {0, 1}) {
      b->Args({dtype, 2816, 1024, 1, kernel});
      b->Args({dtype, 1024, 2816, 1, kernel});
    }
  // M-tiny's shapes: K = 256 (and 688), where each output's horizontal sum
  // is a large part of the tile's work.
  for (int kernel : {0, 1}) {
    b->Args({int(DType::f32), 688, 256, 1, kernel});
    b->Args({int(DType::f32), 256, 688, 1, kernel});
  }
}
BENCHMARK(BM_MatmulPrefill)->Apply(prefill_args)->Unit(benchmark::kMillisecond);

// args: dtype, tokens. A decode batch of a few sequences (M-100's 2048 x
// 768 gate/up shape, weights in the L3 so the rate is compute, not DRAM):
// where the batched path's panel conversion stops paying for itself (Q8_0:
// the token tiles for 2-64 tokens, the packed GEMM tile from 65).
void BM_MatmulSmallBatch(benchmark::State& state) {
  const auto dtype = DType(state.range(0));
  const std::int64_t rows = 2048, cols = 768, tokens = state.range(1);
  WeightRing ring(dtype, rows, cols, 1);
  kc::ThreadPool pool(1);
  auto x = random_rows(tokens * cols);
  std::vector<float> y(std::size_t(tokens * rows)), scratch;
  for (auto _ : state) {
    run_kernel(0, kc::ConstRowsView(x.data(), tokens, cols, cols), ring.view(0),
               kc::RowsView{y.data(), tokens, rows, rows}, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * double(tokens * rows * cols) * double(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
  state.SetLabel(pensieve::model::dtype_name(dtype));
}
BENCHMARK(BM_MatmulSmallBatch)
    ->ArgsProduct({{int(DType::f32), int(DType::f16), int(DType::q8_0)},
                   {2, 3, 4, 6, 8, 12, 16, 24, 32}});

void BM_MatmulPrefill2Threads(benchmark::State& state) { BM_MatmulPrefill(state); }
BENCHMARK(BM_MatmulPrefill2Threads)
    ->Args({int(DType::f32), 2816, 1024, 2, 0})
    ->Args({int(DType::f32), 2816, 1024, 2, 1})
    ->Args({int(DType::q8_0), 2816, 1024, 2, 0})
    ->Args({int(DType::q8_0), 2816, 1024, 2, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Q8_0: the int8 kernel (0) against the dequantising kernel it replaced (2),
// side by side in one run: decode from DRAM (args as BM_MatmulDecode), from
// the L2 (as BM_MatmulDecodeCached) and prefill (as BM_MatmulPrefill).
void BM_Q8Decode(benchmark::State& state) { BM_MatmulDecode(state); }
BENCHMARK(BM_Q8Decode)->ArgsProduct({{int(DType::q8_0)}, {0, 1}, {0, 2}, {1}});
void BM_Q8Decode2Threads(benchmark::State& state) { BM_MatmulDecode(state); }
BENCHMARK(BM_Q8Decode2Threads)->ArgsProduct({{int(DType::q8_0)}, {0, 1}, {0, 2}, {2}})->UseRealTime();
void BM_Q8DecodeCached(benchmark::State& state) { BM_MatmulDecodeCached(state); }
BENCHMARK(BM_Q8DecodeCached)->ArgsProduct({{int(DType::q8_0)}, {0, 2}});
void BM_Q8Prefill(benchmark::State& state) { BM_MatmulPrefill(state); }
BENCHMARK(BM_Q8Prefill)
    ->ArgsProduct({{int(DType::q8_0)}, {2816}, {1024}, {1}, {0, 2}})
    ->ArgsProduct({{int(DType::q8_0)}, {1024}, {2816}, {1}, {0, 2}})
    ->Unit(benchmark::kMillisecond);
void BM_Q8Prefill2Threads(benchmark::State& state) { BM_MatmulPrefill(state); }
BENCHMARK(BM_Q8Prefill2Threads)
    ->ArgsProduct({{int(DType::q8_0)}, {2816}, {1024}, {2}, {0, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

namespace {

// One empty loop through the 2-thread pool: the fork/join cost every
// parallel kernel call of a decode step pays.
void BM_ThreadPoolForkJoin(benchmark::State& state) {
  kc::ThreadPool pool(2, 0.0);
  std::size_t sink = 0;
  for (auto _ : state) {
    pool.parallel_for(
        2, [&](std::size_t begin, std::size_t, std::size_t) { benchmark::DoNotOptimize(sink += begin); }, 1);
  }
}
BENCHMARK(BM_ThreadPoolForkJoin)->UseRealTime();

}  // namespace
