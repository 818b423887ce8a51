// The int8 Q8_0 matmul (q8_matmul.hpp): exact against its scalar definition
// on every path, batch and thread-count invariant, and within the activation
// rounding of the F32 matmul on the dequantised weights.
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/kernels/cpu/q8_activations.hpp"
#include "gpu/kernels/cpu/q8_matmul.hpp"
#include "gpu/kernels/cpu/q8_tiles.hpp"
#include "gpu/formats/half.hpp"
#include "tests/gpu/q8_test_data.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;
using pensieve::test::Q8Weight;
using pensieve::test::q8_reference;
using pensieve::test::random_rows;
using pensieve::test::same_bits;

namespace {

std::vector<float> run(const kc::WeightView& w, const std::vector<float>& x, std::int64_t n_tokens,
                       std::size_t threads, kc::Q8Path path = kc::Q8Path::best) {
  kc::ThreadPool pool(threads, 0.0);  // every call through the workers
  std::vector<float> y(std::size_t(n_tokens * w.rows)), scratch;
  kc::q8_matmul(kc::ConstRowsView(x.data(), n_tokens, w.cols, w.cols), w,
                kc::RowsView{y.data(), n_tokens, w.rows, w.rows}, pool, scratch, path);
  return y;
}

}  // namespace

TEST_CASE("quantising an activation block rounds max|x| / 127 steps to nearest, ties to even",
          "[kernels][q8]") {
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;  // block 0: d = 1 exactly, so x itself is the scaled value
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = -126.49f;
  x[5] = 0.5f;
  // block 1 stays zero: d = 0 and every quant 0
  std::vector<std::int8_t> q(64, 99);
  std::vector<float> d(2, -1.0f);
  kc::quantize_row_q8(x.data(), 64, q.data(), d.data());
  CHECK(d[0] == 1.0f);
  CHECK(d[1] == 0.0f);
  CHECK(std::vector<int>(q.begin(), q.begin() + 6) == std::vector<int>{127, 2, 4, -2, -126, 0});
  CHECK(std::all_of(q.begin() + 32, q.end(), [](std::int8_t v) { return v == 0; }));
}

TEST_CASE("the SIMD activation quantiser gives the portable one's bytes", "[kernels][q8]") {
  auto x = random_rows(1, 32 * 200, 41);
  for (std::size_t i = 0; i < x.size(); i += 7) x[i] *= 1000.0f;  // uneven block magnitudes
  std::vector<std::int8_t> q1(x.size()), q2(x.size());
  std::vector<float> d1(x.size() / 32), d2(x.size() / 32);
  kc::quantize_row_q8(x.data(), std::int64_t(x.size()), q1.data(), d1.data());
  kc::quantize_row_q8_portable(x.data(), std::int64_t(x.size()), q2.data(), d2.data());
  CHECK(q1 == q2);
  CHECK(same_bits(d1.data(), d2.data(), d1.size()));
}

TEST_CASE("an int8 Q8_0 matmul equals its scalar reference bit for bit for 1 to 70 tokens, odd row "
          "counts and 1 to 3 threads",
          "[kernels][q8]") {
  for (const std::int64_t in : {32, 96, 544}) {
    for (const std::int64_t out : {1, 7, 61, 133}) {
      Q8Weight w(out, in, std::uint32_t(in + out));
      const auto x = random_rows(70, in, std::uint32_t(in * out));
      const auto want = q8_reference(w.view, x, 70);
      for (const std::int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 13, 17, 31, 64, 70}) {
        for (const std::size_t threads : {1u, 2u, 3u}) {
          INFO("in " << in << " out " << out << " tokens " << n << " threads " << threads);
          CHECK(same_bits(run(w.view, x, n, threads).data(), want.data(), std::size_t(n * out)));
        }
      }
    }
  }
}

TEST_CASE("a Q8_0 matmul row has the same bits alone and in batches of any size", "[kernels][q8]") {
  const std::int64_t in = 1088, out = 150, n = 250;
  Q8Weight w(out, in, 5);
  const auto x = random_rows(n, in, 6);
  const auto batch = run(w.view, x, n, 2);
  for (const std::int64_t t : {0, 5, 6, 7, 100, 249}) {
    const std::vector<float> one(x.begin() + t * in, x.begin() + (t + 1) * in);
    INFO("token " << t);
    CHECK(same_bits(run(w.view, one, 1, 1).data(), batch.data() + t * out, std::size_t(out)));
    // and inside a 17-token batch (token tiles in groups of 6, 6 and 5;
    // at the end a 9-token one, groups of 5 and 4)
    const std::int64_t first = std::max<std::int64_t>(0, t - 8);
    const std::int64_t count = std::min<std::int64_t>(17, n - first);
    const std::vector<float> some(x.begin() + first * in, x.begin() + (first + count) * in);
    const auto part = run(w.view, some, count, 3);
    CHECK(same_bits(part.data() + (t - first) * out, batch.data() + t * out, std::size_t(out)));
  }
}

TEST_CASE("the VNNI Q8_0 paths give the portable path's bits", "[kernels][q8]") {
  // Chosen at run time: whatever the build's -march, a CPU with VNNI runs them.
  if (!kc::q8_vnni_available()) {
    WARN("this CPU lacks AVX-512 VNNI: the VNNI Q8_0 paths are not run");
    return;
  }
  const std::int64_t in = 2048, out = 77;
  Q8Weight w(out, in, 8);
  const auto x = random_rows(70, in, 9);
  // The one-token tile, the token tiles (one group, several), the batched panels.
  for (const std::int64_t n : {1, 3, 40, 70}) {
    INFO("tokens " << n);
    CHECK(same_bits(run(w.view, x, n, 2).data(), run(w.view, x, n, 2, kc::Q8Path::portable).data(),
                    std::size_t(n * out)));
  }
}

TEST_CASE(
    "a Q8_0 matmul with 7 to 47 output rows writes each row's reference bits and "
    "nothing past the row ends",
    "[kernels][q8]") {
  // Row counts around the 8-row decode tile and the 16-row grain: a last
  // tile that moves down over rows another range owns, and its stores
  // confined to the range (7: fewer rows than a tile).
  const float poison = -12345.0f;
  for (const std::int64_t in : {32, 64, 1056}) {
    for (const std::int64_t out : {7, 9, 15, 16, 17, 23, 31, 33, 47}) {
      Q8Weight w(out, in, std::uint32_t(3 * in + out));
      const auto x = random_rows(3, in, std::uint32_t(in + 7 * out));
      const auto want = q8_reference(w.view, x, 3);
      const std::int64_t stride = out + 5;
      for (const std::int64_t n : {1, 3}) {
        for (const std::size_t threads : {1u, 2u, 3u}) {
          kc::ThreadPool pool(threads, 0.0);
          std::vector<float> y(std::size_t(n * stride), poison), scratch;
          kc::q8_matmul(kc::ConstRowsView(x.data(), n, in, in), w.view,
                        kc::RowsView{y.data(), n, out, stride}, pool, scratch);
          INFO("in " << in << " out " << out << " tokens " << n << " threads " << threads);
          for (std::int64_t t = 0; t < n; ++t) {
            CHECK(same_bits(y.data() + t * stride, want.data() + t * out, std::size_t(out)));
            CHECK(std::all_of(y.begin() + t * stride + out, y.begin() + (t + 1) * stride,
                              [&](float v) { return v == poison; }));
          }
        }
      }
    }
  }
}

#if defined(PENSIEVE_Q8_VNNI)
TEST_CASE("the Q8_0 decode tile stores exactly the rows of its mask, with the reference's bits",
          "[kernels][q8]") {
  const float poison = -12345.0f;
  for (const std::int64_t in : {32, 64, 1056}) {  // 1, 2 and 33 blocks
    const std::int64_t nb = in / 32;
    Q8Weight w(kc::q8_gemv_rows + 8, in, std::uint32_t(in));  // 8 more rows to prefetch
    const auto x = random_rows(1, in, std::uint32_t(in + 1));
    std::vector<std::int8_t> q(static_cast<std::size_t>(in));
    std::vector<float> d(static_cast<std::size_t>(nb));
    kc::quantize_row_q8_portable(x.data(), in, q.data(), d.data());
    for (const unsigned mask : {0xffu, 0x01u, 0x80u, 0x0fu, 0xf0u, 0x7eu, 0x5au}) {
      for (const bool prefetch : {false, true}) {
        std::vector<float> y(kc::q8_gemv_rows, poison);
        kc::q8_gemv_tile(q.data(), d.data(), w.view.row(0), w.view.row_bytes, nb, y.data(),
                         __mmask8(mask), prefetch ? w.view.row(kc::q8_gemv_rows) : nullptr);
        INFO("blocks " << nb << " mask " << mask << " prefetch " << prefetch);
        for (int r = 0; r < kc::q8_gemv_rows; ++r) {
          const float want = (mask >> r) & 1u
                                 ? kc::q8_dot_reference(q.data(), d.data(), w.view.row(r), nb)
                                 : poison;
          CHECK(same_bits(&y[std::size_t(r)], &want, 1));
        }
      }
    }
  }
}
#endif

TEST_CASE("a Q8_0 matmul is within the activation rounding of the F32 matmul on the dequantised weights",
          "[kernels][q8]") {
  // Quantising x moves x[k] by at most d_b / 2 (d_b = max|x_b| / 127), and
  // rounding d_b to F16 (as ggml does) moves q * d_b by at most 127 * d_b *
  // 2^-11 more, so the exact product moves by at most
  // sum_b (d_b / 2 + 127 d_b 2^-11) * sum_{k in b} |w[k]|; the
  // F32 steps (a block scale product and one FMA per block) add a few ulps of
  // sum |x w|, bounded here by 1e-5 of it.
  const std::int64_t in = 1024, out = 40, n = 12;
  Q8Weight w(out, in, 11);
  const auto x = random_rows(n, in, 12);
  std::vector<float> deq(std::size_t(out * in));
  for (std::int64_t o = 0; o < out; ++o) kc::dequantize_row(DType::q8_0, w.view.row(o), in, deq.data() + o * in);
  const auto y = run(w.view, x, n, 2);
  double worst_share = 0;  // the largest error as a share of its bound
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      double exact = 0, mag = 0, bound = 0;
      for (std::int64_t b = 0; b < in / 32; ++b) {
        double amax = 0, wsum = 0;
        for (std::int64_t k = b * 32; k < b * 32 + 32; ++k) {
          const double xv = x[std::size_t(t * in + k)], wv = deq[std::size_t(o * in + k)];
          exact += xv * wv;
          mag += std::fabs(xv * wv);
          amax = std::max(amax, std::fabs(xv));
          wsum += std::fabs(wv);
        }
        bound += (amax / 127.0 / 2.0 + amax / 2048.0) * wsum;
      }
      const double err = std::fabs(double(y[std::size_t(t * out + o)]) - exact);
      REQUIRE(err <= bound + 1e-5 * mag);
      worst_share = std::max(worst_share, err / bound);
    }
  }
  // The bound is not vacuous: the rounding shows (errors of a random walk
  // reach a few percent of the worst case), but it is not F32 exact either.
  CHECK(worst_share > 0.01);
}

TEST_CASE("dequantize_q8_0 selects the F32 matmul on the dequantised weights, bit for bit",
          "[kernels][q8]") {
  const std::int64_t in = 128, out = 19, n = 5;
  Q8Weight w(out, in, 3);
  std::vector<float> deq(std::size_t(out * in));
  for (std::int64_t o = 0; o < out; ++o) kc::dequantize_row(DType::q8_0, w.view.row(o), in, deq.data() + o * in);
  const kc::WeightView f32{DType::f32, reinterpret_cast<const std::byte*>(deq.data()), out, in,
                           std::size_t(in) * 4};
  const auto x = random_rows(n, in, 5);
  kc::ThreadPool pool(2);
  std::vector<float> y_old(std::size_t(n * out)), y_f32(std::size_t(n * out)), y_new(std::size_t(n * out));
  kc::MatmulParams old_params;
  old_params.dequantize_q8_0 = true;
  const kc::ConstRowsView xv(x.data(), n, in, in);
  kc::matmul(old_params, xv, w.view, kc::RowsView{y_old.data(), n, out, out}, pool);
  kc::matmul({}, xv, f32, kc::RowsView{y_f32.data(), n, out, out}, pool);
  kc::matmul({}, xv, w.view, kc::RowsView{y_new.data(), n, out, out}, pool);
  CHECK(same_bits(y_old.data(), y_f32.data(), y_old.size()));
  // and the default is the int8 path: its reference's bits
  CHECK(same_bits(y_new.data(), q8_reference(w.view, x, n).data(), y_new.size()));
}

TEST_CASE("matmul_many over Q8_0 weights gives each weight's matmul bits, decode and batched",
          "[kernels][q8]") {
  const std::int64_t in = 256;
  Q8Weight wq(72, in, 21), wk(24, in, 22), wv(19, in, 23);  // 19: a weight that ends mid-tile
  const kc::WeightView ws[] = {wq.view, wk.view, wv.view};
  for (const std::int64_t n : {1, 2, 20}) {
    const auto x = random_rows(n, in, 24);
    const kc::ConstRowsView xv(x.data(), n, in, in);
    std::vector<std::vector<float>> fused, alone;
    std::vector<kc::RowsView> views;
    for (const auto& w : ws) {
      fused.emplace_back(std::size_t(n * w.rows));
      alone.emplace_back(std::size_t(n * w.rows));
    }
    for (std::size_t i = 0; i < 3; ++i) views.push_back({fused[i].data(), n, ws[i].rows, ws[i].rows});
    kc::ThreadPool pool(2, 0.0);
    std::vector<float> scratch;
    kc::matmul_many({}, xv, ws, views, pool, scratch);
    for (std::size_t i = 0; i < 3; ++i) {
      kc::matmul({}, xv, ws[i], kc::RowsView{alone[i].data(), n, ws[i].rows, ws[i].rows}, pool, scratch);
      INFO("tokens " << n << " weight " << i);
      CHECK(fused[i] == alone[i]);
      CHECK(same_bits(fused[i].data(), q8_reference(ws[i], x, n).data(), fused[i].size()));
    }
  }
}
