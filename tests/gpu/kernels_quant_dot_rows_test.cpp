// The multi-row quant dots (one weight row against several activation rows,
// quant_dot_rows_fn) and quant_matmul's decode batches through them: every
// row has its scalar reference's bits, over every group size and odd batch
// sizes, on each path that has them.
#include "gpu/kernels/cpu/quant_matmul.hpp"
#include "tests/gpu/quant_kernel_checks.hpp"
#include "tests/gpu/quant_test_blocks.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;
using pensieve::testing::quantised_dtypes;
using pensieve::testing::random_blocks;
using pensieve::testing::act_rows_for;
using pensieve::testing::random_floats;
using pensieve::testing::same_bits;
using pensieve::testing::stores_masked_rows;

namespace {

constexpr DType multi_row_types[] = {DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_xs};
constexpr DType tile_types[] = {DType::q4_k, DType::q5_k, DType::q6_k};  // token tiles
constexpr DType one_token_tile_types[] = {DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_xs};

}  // namespace

TEST_CASE(
    "AVX-512 has the multi-row dots of Q4_K, Q5_K, Q6_K and IQ4_XS, the portable and AVX2 paths "
    "none",
    "[kernels][quant][quant_dot]") {
  for (DType t : quantised_dtypes) {
    INFO(pensieve::model::dtype_name(t));
    CHECK(kc::quant_dot_rows_fn(t, kc::QuantDotPath::portable) == nullptr);
    CHECK(kc::quant_dot_rows_fn(t, kc::QuantDotPath::avx2) == nullptr);
    const bool listed = std::find(std::begin(multi_row_types), std::end(multi_row_types), t) !=
                        std::end(multi_row_types);
    const bool runs = kc::quant_dot_path_supported(kc::QuantDotPath::avx512);
    CHECK((kc::quant_dot_rows_fn(t, kc::QuantDotPath::avx512) != nullptr) == (listed && runs));
  }
}

TEST_CASE("a multi-row quant dot gives every row its reference dot's bits, 1 to 8 rows",
          "[kernels][quant][quant_dot]") {
  if (!kc::quant_dot_path_supported(kc::QuantDotPath::avx512)) {
    WARN("SKIPPED: this CPU has no AVX-512 VNNI: no multi-row kernels to check");
    return;
  }
  for (DType t : multi_row_types) {
    const kc::QuantDotRowsFn rows_fn = kc::quant_dot_rows_fn(t, kc::QuantDotPath::avx512);
    const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
    REQUIRE(rows_fn != nullptr);
    for (std::int64_t nb : {1, 3}) {
      const std::int64_t cols = nb * 256;
      const auto w = random_blocks(t, nb, 900 + unsigned(t) + unsigned(nb));
      const auto acts = act_rows_for(t, kc::quant_dot_rows_max, cols, 901);
      const std::vector<kc::QuantActRow>& rows = acts.rows;
      for (int n = 1; n <= kc::quant_dot_rows_max; ++n) {
        // y strided 3 apart, the gaps poisoned: only each row's slot is written.
        std::vector<float> y(std::size_t(3 * n), -7.0f);
        rows_fn(w.data(), rows.data(), n, nb, y.data(), 3);
        INFO(pensieve::model::dtype_name(t) << " blocks " << nb << " rows " << n);
        for (int r = 0; r < n; ++r) {
          CHECK(same_bits(y[std::size_t(3 * r)], ref(w.data(), rows[std::size_t(r)], nb)));
          CHECK(y[std::size_t(3 * r + 1)] == -7.0f);
        }
      }
    }
  }
}

TEST_CASE("a K-quant decode batch of 2 to 64 tokens gives every token its reference dot's bits",
          "[kernels][quant][quant_dot]") {
  for (DType t : multi_row_types) {
    const std::int64_t rows = 21, cols = 2 * 256, nb = 2;
    const auto w = random_blocks(t, rows * nb, 910 + unsigned(t));
    const kc::WeightView wv{t, w.data(), rows, cols, pensieve::model::dtype_row_bytes(t, cols)};
    const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
    for (std::int64_t n : {2, 3, 7, 8, 9, 15, 17, 33, 64}) {
      const auto x = random_floats(n * cols, 911 + unsigned(n));
      std::vector<float> storage;
      const kc::QuantActs acts =
          kc::quantize_act_rows(kc::act_quant_for(t), kc::ConstRowsView(x.data(), n, cols, cols), storage);
      for (std::size_t threads : {1u, 2u}) {
        kc::ThreadPool pool(threads, 0.0);
        std::vector<float> y(std::size_t(n * rows)), scratch;
        kc::quant_matmul(kc::ConstRowsView(x.data(), n, cols, cols), wv,
                         kc::RowsView{y.data(), n, rows, rows}, pool, scratch);
        bool all_equal = true;
        for (std::int64_t tk = 0; tk < n; ++tk)
          for (std::int64_t o = 0; o < rows; ++o)
            all_equal = all_equal && same_bits(y[std::size_t(tk * rows + o)], ref(wv.row(o), acts.row(tk), nb));
        INFO(pensieve::model::dtype_name(t) << " tokens " << n << " threads " << threads);
        CHECK(all_equal);
      }
    }
  }
}

TEST_CASE(
    "AVX-512 has the 8-row decode tiles of Q4_K, Q5_K, Q6_K and IQ4_XS, the portable and AVX2 "
    "paths none",
    "[kernels][quant][quant_dot]") {
  for (DType t : quantised_dtypes) {
    const bool listed = std::find(std::begin(one_token_tile_types), std::end(one_token_tile_types),
                                  t) != std::end(one_token_tile_types);
    INFO(pensieve::model::dtype_name(t));
    CHECK(kc::quant_dot_tile_fn(t, kc::QuantDotPath::portable) == nullptr);
    CHECK(kc::quant_dot_tile_fn(t, kc::QuantDotPath::avx2) == nullptr);
    const bool runs = kc::quant_dot_path_supported(kc::QuantDotPath::avx512);
    CHECK((kc::quant_dot_tile_fn(t, kc::QuantDotPath::avx512) != nullptr) == (listed && runs));
  }
}

TEST_CASE(
    "a K-quant 8-row tile stores each row of its mask with the reference dot's bits, and nothing "
    "else",
    "[kernels][quant][quant_dot]") {
  if (!kc::quant_dot_path_supported(kc::QuantDotPath::avx512)) {
    WARN("this CPU lacks AVX-512 VNNI: the K-quant tiles are not run");
    return;
  }
  for (DType t : one_token_tile_types) {
    const kc::QuantDotTileFn tile = kc::quant_dot_tile_fn(t, kc::QuantDotPath::avx512);
    const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
    REQUIRE(tile != nullptr);
    for (std::int64_t nb : {1, 2, 3, 8, 9, 17}) {  // one pass, several (tile_pass_blocks = 8)
      const std::int64_t rows = 8, cols = nb * 256;
      const std::size_t row_bytes = pensieve::model::dtype_row_bytes(t, cols);
      const auto w = random_blocks(t, rows * nb, 920 + unsigned(t) + unsigned(nb));
      const auto x = act_rows_for(t, 1, cols, 921 + unsigned(nb));
      for (unsigned store : {0xffu, 0x01u, 0x80u, 0x5au, 0xf0u}) {
        std::vector<float> y(rows, -7.0f);
        // The prefetch range: this tile's own rows (any readable memory).
        tile(w.data(), row_bytes, x.rows[0], nb, y.data(), store, w.data(), w.size());
        INFO(pensieve::model::dtype_name(t) << " blocks " << nb << " store " << store);
        CHECK(stores_masked_rows(ref, w, row_bytes, x.rows, 1, nb, y, rows, rows, store));
      }
    }
  }
}

TEST_CASE(
    "a K-quant 8-row tile keeps the reference dot's bits at the largest products: no word "
    "saturates",
    "[kernels][quant][quant_dot]") {
  if (!kc::quant_dot_path_supported(kc::QuantDotPath::avx512)) {
    WARN("this CPU lacks AVX-512 VNNI: the K-quant tiles are not run");
    return;
  }
  // The one-token tiles pack each vpdpbusd's 32-bit sums of four products
  // to words: at most 4 * 15 * 128 (Q4_K), 4 * 31 * 128 (Q5_K) and
  // 4 * 32 * 128 (Q6_K, weights - 32) in magnitude; IQ4_XS's reach
  // 4 * 127 * 128 and stay in 32 bits. Every quant byte of the
  // rows is 0x00, 0xff or 0x80 (the largest and smallest weights, Q6_K's
  // scale -128), every activation byte -128 or 127.
  const std::int64_t nb = 3, cols = nb * 256, rows = 8;
  std::vector<std::int8_t> q(static_cast<std::size_t>(cols));
  std::vector<float> d(static_cast<std::size_t>(nb), 0.03125f);
  std::vector<std::int16_t> bsums(static_cast<std::size_t>(cols / 16));
  for (std::int64_t b = 0; b < nb; ++b)
    for (std::int64_t k = 0; k < 256; ++k)
      q[std::size_t(b * 256 + k)] = b == 1 ? std::int8_t(127) : std::int8_t(-128);
  for (std::size_t j = 0; j < bsums.size(); ++j) {
    int sum = 0;
    for (std::size_t k = 0; k < 16; ++k) sum += q[16 * j + k];
    bsums[j] = std::int16_t(sum);
  }
  const std::vector<kc::QuantActRow> x = {{q.data(), d.data(), nullptr, bsums.data()}};
  for (DType t : one_token_tile_types) {
    const kc::QuantDotTileFn tile = kc::quant_dot_tile_fn(t, kc::QuantDotPath::avx512);
    const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
    REQUIRE(tile != nullptr);
    const std::size_t row_bytes = pensieve::model::dtype_row_bytes(t, cols);
    const std::size_t block = pensieve::model::dtype_block_bytes(t);
    auto w = random_blocks(t, rows * nb, 940 + unsigned(t));
    const auto f16 = pensieve::testing::f16_fields(t);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t b = 0; b < nb; ++b)
        for (std::size_t at = 0; at < block; ++at) {
          if (std::find(f16.begin(), f16.end(), at) != f16.end() ||
              std::find(f16.begin(), f16.end(), at - 1) != f16.end())
            continue;
          std::byte v = r % 2 == 0 ? std::byte(0xff) : std::byte(0x00);
          if (t == DType::q6_k && at >= 192) v = std::byte(0x80);  // the scales: -128
          w[std::size_t(r) * row_bytes + std::size_t(b) * block + at] = v;
        }
    std::vector<float> y(rows, -7.0f);
    tile(w.data(), row_bytes, x[0], nb, y.data(), 0xffu, nullptr, 0);
    INFO(pensieve::model::dtype_name(t));
    CHECK(stores_masked_rows(ref, w, row_bytes, x, 1, nb, y, rows, rows, 0xffu));
    // The sums themselves are large: a saturating kernel would differ.
    CHECK(std::fabs(y[0]) > 0.0f);
  }
}

TEST_CASE("a one-token K-quant matmul over odd row counts gives every row its reference dot's bits",
          "[kernels][quant][quant_dot]") {
  for (DType t : multi_row_types) {
    for (std::int64_t rows : {7, 8, 9, 15, 17, 31, 61, 200}) {
      const std::int64_t cols = 3 * 256, nb = 3;
      const auto w = random_blocks(t, rows * nb, 930 + unsigned(t) + unsigned(rows));
      const kc::WeightView wv{t, w.data(), rows, cols, pensieve::model::dtype_row_bytes(t, cols)};
      const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
      const auto x = random_floats(cols, 931);
      std::vector<float> storage;
      const kc::QuantActs acts = kc::quantize_act_rows(
          kc::act_quant_for(t), kc::ConstRowsView(x.data(), 1, cols, cols), storage);
      for (std::size_t threads : {1u, 2u}) {
        kc::ThreadPool pool(threads, 0.0);
        std::vector<float> y(static_cast<std::size_t>(rows)), scratch;
        kc::quant_matmul(kc::ConstRowsView(x.data(), 1, cols, cols), wv,
                         kc::RowsView{y.data(), 1, rows, rows}, pool, scratch);
        bool all_equal = true;
        for (std::int64_t o = 0; o < rows; ++o)
          all_equal = all_equal && same_bits(y[std::size_t(o)], ref(wv.row(o), acts.row(0), nb));
        INFO(pensieve::model::dtype_name(t) << " rows " << rows << " threads " << threads);
        CHECK(all_equal);
      }
    }
  }
}

TEST_CASE(
    "AVX-512 has the token tiles of Q4_K, Q5_K and Q6_K, AVX2 that of Q8_0, the portable path "
    "none",
    "[kernels][quant][quant_dot]") {
  for (DType t : quantised_dtypes) {
    const bool listed = t == DType::q4_k || t == DType::q5_k || t == DType::q6_k;
    INFO(pensieve::model::dtype_name(t));
    CHECK(kc::quant_dot_token_tile_fn(t, kc::QuantDotPath::portable) == nullptr);
    const bool avx2 = kc::quant_dot_path_supported(kc::QuantDotPath::avx2);
    CHECK((kc::quant_dot_token_tile_fn(t, kc::QuantDotPath::avx2) != nullptr) ==
          (t == DType::q8_0 && avx2));
    const bool runs = kc::quant_dot_path_supported(kc::QuantDotPath::avx512);
    CHECK((kc::quant_dot_token_tile_fn(t, kc::QuantDotPath::avx512) != nullptr) == (listed && runs));
  }
}

TEST_CASE(
    "a K-quant token tile stores each row of its mask for each of 1 to 4 tokens with the reference "
    "dot's bits, and nothing else",
    "[kernels][quant][quant_dot]") {
  if (!kc::quant_dot_path_supported(kc::QuantDotPath::avx512)) {
    WARN("this CPU lacks AVX-512 VNNI: the K-quant token tiles are not run");
    return;
  }
  for (DType t : tile_types) {
    const kc::QuantDotTokenTileFn tile = kc::quant_dot_token_tile_fn(t, kc::QuantDotPath::avx512);
    const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
    REQUIRE(tile != nullptr);
    // One pass and several (4 or 8 blocks a pass by the token count).
    for (std::int64_t nb : {1, 3, 4, 5, 8, 9, 17}) {
      const std::int64_t rows = 8, cols = nb * 256, stride = 11;
      const std::size_t row_bytes = pensieve::model::dtype_row_bytes(t, cols);
      const auto w = random_blocks(t, rows * nb, 940 + unsigned(t) + unsigned(nb));
      const int max_tokens = kc::quant_dot_tile_tokens_max;
      const auto x = act_rows_for(t, max_tokens, cols, 941 + unsigned(nb));
      for (int n = 1; n <= max_tokens; ++n) {
        for (unsigned store : {0xffu, 0x01u, 0x80u, 0x5au, 0xf0u}) {
          // Token k's rows at k * stride; the 3 slots after each token's 8 poisoned.
          std::vector<float> y(std::size_t(n * stride), -7.0f);
          tile(w.data(), row_bytes, x.rows.data(), n, nb, y.data(), stride, store, w.data(),
               w.size());
          INFO(pensieve::model::dtype_name(t) << " blocks " << nb << " tokens " << n << " store "
                                              << store);
          CHECK(stores_masked_rows(ref, w, row_bytes, x.rows, n, nb, y, rows, stride, store));
        }
      }
    }
  }
}

TEST_CASE(
    "a K-quant decode batch over odd row counts and block counts gives every token its reference "
    "dot's bits on every path",
    "[kernels][quant][quant_dot]") {
  for (kc::QuantDotPath path :
       {kc::QuantDotPath::portable, kc::QuantDotPath::avx2, kc::QuantDotPath::avx512}) {
    if (!kc::quant_dot_path_supported(path)) {
      WARN("this CPU lacks " << kc::quant_dot_path_name(path) << ": not run");
      continue;
    }
    for (DType t : multi_row_types) {
      const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
      for (std::int64_t rows : {8, 9, 17, 61}) {
        for (std::int64_t nb : {1, 3, 5}) {
          const std::int64_t cols = nb * 256;
          const auto w = random_blocks(t, rows * nb, 950 + unsigned(t) + unsigned(rows * nb));
          const kc::WeightView wv{t, w.data(), rows, cols, pensieve::model::dtype_row_bytes(t, cols)};
          for (std::int64_t n : {2, 5, 6, 11}) {
            const auto x = random_floats(n * cols, 951 + unsigned(n));
            std::vector<float> storage;
            const kc::QuantActs acts = kc::quantize_act_rows(
                kc::act_quant_for(t), kc::ConstRowsView(x.data(), n, cols, cols), storage);
            kc::ThreadPool pool(2, 0.0);
            std::vector<float> y(std::size_t(n * rows)), scratch;
            kc::quant_matmul(kc::ConstRowsView(x.data(), n, cols, cols), wv,
                             kc::RowsView{y.data(), n, rows, rows}, pool, scratch, path);
            bool all_equal = true;
            for (std::int64_t tk = 0; tk < n; ++tk)
              for (std::int64_t o = 0; o < rows; ++o)
                all_equal = all_equal &&
                            same_bits(y[std::size_t(tk * rows + o)], ref(wv.row(o), acts.row(tk), nb));
            INFO(pensieve::model::dtype_name(t) << " " << kc::quant_dot_path_name(path) << " rows "
                                                << rows << " blocks " << nb << " tokens " << n);
            CHECK(all_equal);
          }
        }
      }
    }
  }
}
