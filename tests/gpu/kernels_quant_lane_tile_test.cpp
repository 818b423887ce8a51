// The lane kernels (16 weight rows in the lanes, quant_lanes_avx512.hpp):
// the K-quant tiles (1 to 8 tokens) and every type's panels (any number of
// tokens, the rows unpacked once). Every stored (row, token) has its scalar
// reference's bits, nothing outside the store mask is written, and
// quant_matmul gives the same bits through panels, lane tiles and the older
// paths (8-row token tiles, one dot per element), over odd row, block and
// token counts and the extreme quants.
#include "gpu/kernels/cpu/quant_matmul.hpp"
#include "tests/gpu/quant_kernel_checks.hpp"
#include "tests/gpu/quant_test_blocks.hpp"

#include <catch2/catch.hpp>

#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;
using pensieve::testing::act_rows_for;
using pensieve::testing::ActRows;
using pensieve::testing::quantised_dtypes;
using pensieve::testing::random_blocks;
using pensieve::testing::random_floats;
using pensieve::testing::same_bits;
using pensieve::testing::stores_masked_rows;

namespace {

constexpr DType lane_types[] = {DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_xs};
// The types with lane panels: Q2_K, Q3_K and the legacy blocks of 32 have
// panels only.
constexpr DType panel_types[] = {DType::q4_0,   DType::q4_1, DType::q5_0,  DType::q5_1,
                                 DType::iq4_nl, DType::q2_k, DType::q3_k,  DType::q4_k,
                                 DType::q5_k,   DType::q6_k, DType::iq4_xs};

// Each type with each prefetch level: the levels are separate kernels.
std::vector<std::pair<DType, kc::PrefetchInto>> by_prefetch(
    std::span<const DType> types, std::initializer_list<kc::PrefetchInto> prefetches) {
  std::vector<std::pair<DType, kc::PrefetchInto>> out;
  for (DType t : types)
    for (kc::PrefetchInto pf : prefetches) out.emplace_back(t, pf);
  return out;
}
std::vector<std::pair<DType, kc::PrefetchInto>> lane_types_by_prefetch() {
  return by_prefetch(lane_types,
                     {kc::PrefetchInto::l1, kc::PrefetchInto::l2, kc::PrefetchInto::l1_by_group});
}
// A panel takes l1_by_group as l1.
std::vector<std::pair<DType, kc::PrefetchInto>> panel_types_by_prefetch() {
  return by_prefetch(panel_types, {kc::PrefetchInto::l1, kc::PrefetchInto::l2});
}

// The tunings of the CPUs in cpu_tuning_for's table.
std::vector<kc::CpuTuning> tunings() {
  return {kc::cpu_tuning_for({kc::CpuVendor::amd, 0x1a, 0x02}),
          kc::cpu_tuning_for({kc::CpuVendor::amd, 0x19, 0x11}),
          kc::cpu_tuning_for({kc::CpuVendor::intel, 0x6, 0x8f})};
}

// random_blocks' F16 fields with every other byte `fill`: all quants, scales
// and mins at their largest (0xff; Q6_K's scales -1) or Q6_K's scales at
// -128 (0x80), where an int32 sum is nearest to overflowing, and every
// fifth or high bit set (0xff) or mostly clear (0x80).
std::vector<std::byte> filled_blocks(DType t, std::int64_t n_blocks, std::uint32_t seed,
                                     std::byte fill) {
  auto w = random_blocks(t, n_blocks, seed);
  const std::size_t bb = pensieve::model::dtype_block_bytes(t);
  const auto fields = pensieve::testing::f16_fields(t);
  for (std::size_t i = 0; i < w.size(); ++i) {
    bool field = false;
    for (std::size_t off : fields) field = field || (i % bb == off || i % bb == off + 1);
    if (!field) w[i] = fill;
  }
  return w;
}

// Pattern 0: random blocks; 1: filled with 0xff; 2: with 0x80.
std::vector<std::byte> pattern_blocks(DType t, std::int64_t n_blocks, std::uint32_t seed,
                                      int pattern) {
  return pattern == 0 ? random_blocks(t, n_blocks, seed)
                      : filled_blocks(t, n_blocks, seed, std::byte(pattern == 1 ? 0xff : 0x80));
}

}  // namespace

TEST_CASE(
    "AVX-512 VNNI has the lane tiles of Q4_K, Q5_K, Q6_K and IQ4_XS and the lane panels of "
    "every quantised type but Q8_0, the other paths none",
    "[kernels][quant][quant_dot]") {
  for (DType t : quantised_dtypes) {
    INFO(pensieve::model::dtype_name(t));
    for (kc::PrefetchInto pf :
         {kc::PrefetchInto::l1, kc::PrefetchInto::l2, kc::PrefetchInto::l1_by_group}) {
      CHECK(kc::quant_dot_lane_tile_fn(t, kc::QuantDotPath::portable, pf) == nullptr);
      CHECK(kc::quant_dot_lane_tile_fn(t, kc::QuantDotPath::avx2, pf) == nullptr);
      CHECK(kc::quant_dot_lane_panel_fn(t, kc::QuantDotPath::portable, pf) == nullptr);
      CHECK(kc::quant_dot_lane_panel_fn(t, kc::QuantDotPath::avx2, pf) == nullptr);
      const bool tiles =
          t == DType::q4_k || t == DType::q5_k || t == DType::q6_k || t == DType::iq4_xs;
      const bool panels = t != DType::q8_0;  // Q8_0 has its own token tiles (q8_matmul)
      const bool runs = kc::quant_dot_path_supported(kc::QuantDotPath::avx512);
      CHECK((kc::quant_dot_lane_tile_fn(t, kc::QuantDotPath::avx512, pf) != nullptr) ==
            (tiles && runs));
      CHECK((kc::quant_dot_lane_panel_fn(t, kc::QuantDotPath::avx512, pf) != nullptr) ==
            (panels && runs));
    }
    // The three prefetches are three tile kernels; a panel takes l1_by_group as l1.
    const auto tile = [t](kc::PrefetchInto pf) {
      return kc::quant_dot_lane_tile_fn(t, kc::QuantDotPath::avx512, pf);
    };
    const auto panel = [t](kc::PrefetchInto pf) {
      return kc::quant_dot_lane_panel_fn(t, kc::QuantDotPath::avx512, pf);
    };
    if (tile(kc::PrefetchInto::l1)) {
      CHECK(tile(kc::PrefetchInto::l1) != tile(kc::PrefetchInto::l2));
      CHECK(tile(kc::PrefetchInto::l1) != tile(kc::PrefetchInto::l1_by_group));
      CHECK(tile(kc::PrefetchInto::l2) != tile(kc::PrefetchInto::l1_by_group));
    }
    if (panel(kc::PrefetchInto::l1)) {
      CHECK(panel(kc::PrefetchInto::l1) != panel(kc::PrefetchInto::l2));
      CHECK(panel(kc::PrefetchInto::l1_by_group) == panel(kc::PrefetchInto::l1));
    }
  }
}

TEST_CASE(
    "a K-quant lane tile stores each row of its mask for each of 1 to 8 tokens with the reference "
    "dot's bits, and nothing else",
    "[kernels][quant][quant_dot]") {
  if (!kc::quant_dot_path_supported(kc::QuantDotPath::avx512)) {
    WARN("SKIPPED: this CPU lacks AVX-512 VNNI: the K-quant lane tiles are not run");
    return;
  }
  constexpr int rows = kc::quant_dot_lane_tile_rows, max_tokens = kc::quant_dot_lane_tile_tokens_max;
  for (const auto& [t, pf] : lane_types_by_prefetch()) {
    const kc::QuantDotLaneTileFn tile = kc::quant_dot_lane_tile_fn(t, kc::QuantDotPath::avx512, pf);
    const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
    REQUIRE(tile != nullptr);
    for (std::int64_t nb : {1, 2, 3, 5, 9}) {
      const std::int64_t cols = nb * 256, stride = 19;
      const std::size_t row_bytes = pensieve::model::dtype_row_bytes(t, cols);
      const ActRows x = act_rows_for(t, max_tokens, cols, 961 + unsigned(nb));
      for (int pattern = 0; pattern < 3; ++pattern) {
        const auto w = pattern_blocks(t, rows * nb, 960 + unsigned(t) + unsigned(nb), pattern);
        for (int n = 1; n <= max_tokens; ++n) {
          for (unsigned store : {0xffffu, 0x0001u, 0x8000u, 0x5a5au, 0x0ff0u}) {
            // Token k's rows at k * stride; the 3 slots after each token's 16 poisoned.
            std::vector<float> y(std::size_t(n * stride), -7.0f);
            tile(w.data(), row_bytes, x.rows.data(), n, nb, y.data(), stride, store, w.data(),
                 w.size());
            INFO(pensieve::model::dtype_name(t) << " blocks " << nb << " pattern " << pattern
                                                << " tokens " << n << " store " << store
                                                << " prefetch into L" << (int(pf) + 1));
            CHECK(stores_masked_rows(ref, w, row_bytes, x.rows, n, nb, y, rows, stride, store));
          }
        }
      }
    }
  }
}

TEST_CASE(
    "a K-quant lane panel stores each row of its mask for 1 to 33 tokens with the reference dot's "
    "bits, and nothing else",
    "[kernels][quant][quant_dot]") {
  if (!kc::quant_dot_path_supported(kc::QuantDotPath::avx512)) {
    WARN("SKIPPED: this CPU lacks AVX-512 VNNI: the K-quant lane panels are not run");
    return;
  }
  constexpr int rows = kc::quant_dot_lane_tile_rows, max_tokens = 33;
  for (const auto& [t, pf] : panel_types_by_prefetch()) {
    const kc::QuantDotLanePanelFn panel = kc::quant_dot_lane_panel_fn(t, kc::QuantDotPath::avx512, pf);
    const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
    REQUIRE(panel != nullptr);
    const std::int64_t elems = pensieve::model::dtype_block_elems(t);
    // One block and several: 256 to 1,024 values of the K-quants, 32 to 768 of the legacy types.
    for (std::int64_t nb : elems == 256 ? std::vector<std::int64_t>{1, 3, 4}
                                        : std::vector<std::int64_t>{1, 5, 24}) {
      const std::int64_t cols = nb * elems, stride = 19;
      const std::size_t row_bytes = pensieve::model::dtype_row_bytes(t, cols);
      const ActRows x = act_rows_for(t, max_tokens, cols, 981 + unsigned(nb));
      // The panel's buffer, 64-byte aligned, poisoned.
      std::vector<std::byte> buf(kc::quant_dot_lane_panel_bytes(t, nb) + 64, std::byte(0xa5));
      void* scratch = reinterpret_cast<void*>(
          (reinterpret_cast<std::uintptr_t>(buf.data()) + 63) / 64 * 64);
      for (int pattern = 0; pattern < 3; ++pattern) {
        const auto w = pattern_blocks(t, rows * nb, 980 + unsigned(t) + unsigned(nb), pattern);
        for (int n : {1, 8, 9, 16, 17, 33}) {
          for (unsigned store : {0xffffu, 0x0001u, 0x8000u, 0x5a5au}) {
            std::vector<float> y(std::size_t(n * stride), -7.0f);
            panel(w.data(), row_bytes, x.rows.data(), n, nb, y.data(), stride, store, scratch,
                  w.data(), w.size());
            INFO(pensieve::model::dtype_name(t) << " blocks " << nb << " pattern " << pattern
                                                << " tokens " << n << " store " << store
                                                << " prefetch into L" << (int(pf) + 1));
            CHECK(stores_masked_rows(ref, w, row_bytes, x.rows, n, nb, y, rows, stride, store));
          }
        }
      }
    }
  }
}

TEST_CASE(
    "a K-quant batch through the lane panels and tiles has the bits of the 8-row token tiles and "
    "of the reference, over odd row and token counts",
    "[kernels][quant][quant_dot]") {
  if (!kc::quant_dot_path_supported(kc::QuantDotPath::avx512)) {
    WARN("SKIPPED: this CPU lacks AVX-512 VNNI: the K-quant lane tiles are not run");
    return;
  }
  for (DType t : panel_types) {
    const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
    for (std::int64_t rows : {16, 17, 31, 33, 200}) {
      const std::int64_t cols = 768, nb = cols / pensieve::model::dtype_block_elems(t);
      const auto w = random_blocks(t, rows * nb, 970 + unsigned(t) + unsigned(rows));
      const kc::WeightView wv{t, w.data(), rows, cols, pensieve::model::dtype_row_bytes(t, cols)};
      for (std::int64_t n : {1, 2, 7, 8, 9, 16, 17, 40}) {
        const auto x = random_floats(n * cols, 971 + unsigned(n));
        std::vector<float> storage;
        const kc::QuantActs acts = kc::quantize_act_rows(
            kc::act_quant_for(t), kc::ConstRowsView(x.data(), n, cols, cols), storage);
        kc::ThreadPool pool(2, 0.0);
        std::vector<float> best(std::size_t(n * rows)), lanes(best.size()), tiles(best.size()),
            scratch;
        const kc::ConstRowsView xv(x.data(), n, cols, cols);
        kc::quant_matmul(xv, wv, kc::RowsView{tiles.data(), n, rows, rows}, pool, scratch,
                         kc::QuantDotPath::avx512, kc::QuantBatchTiles::token_tiles);
        // Every CPU's tuning: one token through the lane tiles or the 8-row
        // tiles, prefetching into the L1 or the L2.
        for (const kc::CpuTuning& tuning : tunings()) {
          kc::quant_matmul(xv, wv, kc::RowsView{best.data(), n, rows, rows}, pool, scratch,
                           kc::QuantDotPath::avx512, kc::QuantBatchTiles::best, tuning);
          kc::quant_matmul(xv, wv, kc::RowsView{lanes.data(), n, rows, rows}, pool, scratch,
                           kc::QuantDotPath::avx512, kc::QuantBatchTiles::lane_tiles, tuning);
          bool as_tiles = true, as_reference = true;
          for (std::int64_t tk = 0; tk < n; ++tk) {
            for (std::int64_t o = 0; o < rows; ++o) {
              const std::size_t i = std::size_t(tk * rows + o);
              as_tiles = as_tiles && same_bits(best[i], tiles[i]) && same_bits(lanes[i], tiles[i]);
              as_reference = as_reference && same_bits(best[i], ref(wv.row(o), acts.row(tk), nb));
            }
          }
          INFO(pensieve::model::dtype_name(t) << " rows " << rows << " tokens " << n << " tuning "
                                              << tuning.name);
          CHECK(as_tiles);
          CHECK(as_reference);
        }
      }
    }
  }
}
