// The Q8_0 token tiles (q8_token_tiles.hpp) and the decode batches that run
// through them: every (row, token) has the one-token path's bits, which are
// the scalar definition's, over odd row, block and token counts, and every
// dispatch path of a Q8_0 matmul this CPU has gives the same.
#include "gpu/formats/half.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/kernels/cpu/q8_activations.hpp"
#include "gpu/kernels/cpu/q8_matmul.hpp"
#include "gpu/kernels/cpu/q8_token_tiles.hpp"
#include "gpu/kernels/cpu/quant_activations.hpp"
#include "gpu/kernels/cpu/quant_matmul.hpp"
#include "tests/gpu/q8_test_data.hpp"

#include <catch2/catch.hpp>

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

constexpr std::int64_t token_counts[] = {1, 2, 3, 5, 7, 8, 9, 17, 33};

}  // namespace

#if defined(PENSIEVE_Q8_VNNI)
TEST_CASE(
    "a Q8_0 token tile stores each row of its mask for each of 1 to 8 tokens with the reference "
    "dot's bits, and nothing else",
    "[kernels][q8]") {
  if (!kc::q8_vnni_available()) {
    WARN("this CPU lacks AVX-512 VNNI: the Q8_0 token tiles are not run");
    return;
  }
  const float poison = -12345.0f;
  constexpr int rows = kc::q8_token_tile_rows, max_tokens = kc::q8_token_tile_tokens_max;
  for (const std::int64_t nb : {1, 2, 3, 33}) {
    const std::int64_t cols = nb * 32, stride = rows + 3;
    // 16 more rows to prefetch.
    const Q8Weight weight(2 * rows, cols, std::uint32_t(700 + nb));
    const kc::WeightView& w = weight.view;
    const auto x = random_rows(max_tokens, cols, std::uint32_t(701 + nb));
    std::vector<float> storage;
    const kc::Q8Rows q =
        kc::quantize_rows_q8(kc::ConstRowsView(x.data(), max_tokens, cols, cols), storage, false);
    std::vector<float> bias_storage;
    const std::byte* bias = kc::q8_token_bias(q, bias_storage);
    for (int n = 1; n <= max_tokens; ++n) {
      for (const unsigned mask : {0xffffu, 0x0001u, 0x8000u, 0x00ffu, 0xff00u, 0x5a5au, 0x7ffeu}) {
        for (const bool prefetch : {false, true}) {
          // Token k's rows at k * stride; the 3 slots after each token's 16 poisoned.
          std::vector<float> y(std::size_t(n * stride), poison);
          kc::q8_token_tile_any(n, q, 0, bias, w.row(0), w.row_bytes, nb, y.data(), stride,
                                __mmask16(mask), prefetch ? w.row(rows) : nullptr);
          bool right = true;
          for (int k = 0; k < n; ++k) {
            for (std::int64_t r = 0; r < stride; ++r) {
              const bool stored = r < rows && ((mask >> r) & 1u);
              const float want =
                  stored ? kc::q8_dot_reference(q.q_row(k), q.d_row(k), w.row(r), nb) : poison;
              right = right && same_bits(&y[std::size_t(k * stride + r)], &want, 1);
            }
          }
          INFO("blocks " << nb << " tokens " << n << " mask " << mask << " prefetch " << prefetch);
          CHECK(right);
        }
      }
    }
  }
}
#endif

TEST_CASE(
    "the AVX2 Q8_0 token tile stores each row of its mask for each of 1 to 4 tokens with the AVX2 "
    "dot's bits, and nothing else",
    "[kernels][q8][quant_dot]") {
  const kc::QuantDotTokenTileFn tile =
      kc::quant_dot_token_tile_fn(DType::q8_0, kc::QuantDotPath::avx2);
  const kc::QuantDotFn dot = kc::quant_dot_fn(DType::q8_0, kc::QuantDotPath::avx2);
  if (tile == nullptr || dot == nullptr) {
    WARN("this CPU lacks AVX2 with F16C: the AVX2 Q8_0 token tile is not run");
    return;
  }
  const float poison = -12345.0f;
  constexpr int rows = kc::quant_dot_tile_rows, max_tokens = kc::quant_dot_tile_tokens_max;
  for (const std::int64_t nb : {1, 2, 3, 33}) {
    const std::int64_t cols = nb * 32, stride = rows + 3;
    const Q8Weight weight(2 * rows, cols, std::uint32_t(750 + nb));  // 8 more to prefetch
    const kc::WeightView& w = weight.view;
    const auto x = random_rows(max_tokens, cols, std::uint32_t(751 + nb));
    std::vector<float> storage;
    const kc::QuantActs acts = kc::quantize_act_rows(
        kc::ActQuant::q8_0, kc::ConstRowsView(x.data(), max_tokens, cols, cols), storage);
    std::vector<kc::QuantActRow> act_rows;
    for (int r = 0; r < max_tokens; ++r) act_rows.push_back(acts.row(r));
    for (int n = 1; n <= max_tokens; ++n) {
      for (const unsigned store : {0xffu, 0x01u, 0x80u, 0x5au, 0xf0u}) {
        for (const bool prefetch : {false, true}) {
          std::vector<float> y(std::size_t(n * stride), poison);
          tile(w.row(0), w.row_bytes, act_rows.data(), n, nb, y.data(), stride, store,
               prefetch ? w.row(rows) : nullptr, prefetch ? std::size_t(rows) * w.row_bytes : 0);
          bool right = true;
          for (int k = 0; k < n; ++k) {
            for (std::int64_t r = 0; r < stride; ++r) {
              const bool stored = r < rows && ((store >> r) & 1u);
              const float want = stored ? dot(w.row(r), act_rows[std::size_t(k)], nb) : poison;
              right = right && same_bits(&y[std::size_t(k * stride + r)], &want, 1);
            }
          }
          INFO("blocks " << nb << " tokens " << n << " store " << store << " prefetch "
                         << prefetch);
          CHECK(right);
        }
      }
    }
  }
}

TEST_CASE(
    "a Q8_0 decode batch gives every token its one-at-a-time bits over odd row, block and token "
    "counts, on every path and thread count",
    "[kernels][q8]") {
  const float poison = -12345.0f;
  for (const std::int64_t nb : {1, 3, 5, 33}) {
    for (const std::int64_t out : {7, 16, 17, 23, 31, 33, 61, 133}) {
      const std::int64_t in = nb * 32, stride = out + 5;
      const Q8Weight weight(out, in, std::uint32_t(800 + nb * out));
      const kc::WeightView& w = weight.view;
      const auto x = random_rows(33, in, std::uint32_t(801 + nb + out));
      const auto want = q8_reference(w, x, 33);
      for (const std::int64_t n : token_counts) {
        const kc::ConstRowsView xv(x.data(), n, in, in);
        for (const kc::Q8Path path :
             {kc::Q8Path::best, kc::Q8Path::per_token, kc::Q8Path::portable}) {
          if (path != kc::Q8Path::portable && !kc::q8_vnni_available()) continue;
          for (const std::size_t threads : {1u, 2u, 3u}) {
            kc::ThreadPool pool(threads, 0.0);  // every call through the workers
            std::vector<float> y(std::size_t(n * stride), poison), scratch;
            kc::q8_matmul(xv, w, kc::RowsView{y.data(), n, out, stride}, pool, scratch, path);
            bool right = true;
            for (std::int64_t t = 0; t < n; ++t) {
              right = right &&
                      same_bits(y.data() + t * stride, want.data() + t * out, std::size_t(out));
              for (std::int64_t r = out; r < stride; ++r)
                right = right && y[std::size_t(t * stride + r)] == poison;
            }
            INFO("blocks " << nb << " rows " << out << " tokens " << n << " path " << int(path)
                           << " threads " << threads);
            CHECK(right);
          }
        }
        // Q8_0's quant dots (quant_matmul: what matmul() takes without VNNI) on each path.
        for (const kc::QuantDotPath path :
             {kc::QuantDotPath::portable, kc::QuantDotPath::avx2, kc::QuantDotPath::avx512}) {
          if (!kc::quant_dot_path_supported(path)) continue;
          kc::ThreadPool pool(2, 0.0);
          std::vector<float> y(std::size_t(n * out)), scratch;
          kc::quant_matmul(xv, w, kc::RowsView{y.data(), n, out, out}, pool, scratch, path);
          INFO("blocks " << nb << " rows " << out << " tokens " << n << " quant_matmul "
                         << kc::quant_dot_path_name(path));
          CHECK(same_bits(y.data(), want.data(), y.size()));
        }
      }
    }
  }
}

TEST_CASE("matmul and matmul_many over Q8_0 weights give a decode batch its one-at-a-time bits",
          "[kernels][q8]") {
  const std::int64_t in = 768;
  const Q8Weight bq(48, in, 901), bk(19, in, 902), bv(33, in, 903);
  const kc::WeightView ws[] = {bq.view, bk.view, bv.view};
  const auto x = random_rows(33, in, 904);
  for (const std::int64_t n : token_counts) {
    const kc::ConstRowsView xv(x.data(), n, in, in);
    std::vector<std::vector<float>> fused;
    std::vector<kc::RowsView> views;
    for (const auto& w : ws) fused.emplace_back(std::size_t(n * w.rows));
    for (std::size_t i = 0; i < 3; ++i)
      views.push_back({fused[i].data(), n, ws[i].rows, ws[i].rows});
    kc::ThreadPool pool(2, 0.0);
    std::vector<float> scratch;
    kc::matmul_many({}, xv, ws, views, pool, scratch);
    for (std::size_t i = 0; i < 3; ++i) {
      std::vector<float> alone(std::size_t(n * ws[i].rows));
      kc::matmul({}, xv, ws[i], kc::RowsView{alone.data(), n, ws[i].rows, ws[i].rows}, pool,
                 scratch);
      const auto want = q8_reference(ws[i], x, n);
      INFO("tokens " << n << " weight " << i);
      CHECK(same_bits(fused[i].data(), want.data(), want.size()));
      CHECK(same_bits(alone.data(), want.data(), want.size()));
    }
  }
}
