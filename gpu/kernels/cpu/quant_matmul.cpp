#include "gpu/kernels/cpu/quant_matmul.hpp"

#include "gpu/kernels/cpu/prefetch.hpp"

#include <algorithm>
#include <cassert>

namespace pensieve::kernels::cpu {

namespace {

// Output rows per scheduling unit, and per tile: a tile's weight rows stay
// in the L1/L2 while every token passes over them.
constexpr std::size_t row_grain = 16;

constexpr std::int64_t prefetch_rows = 4;

void prefetch_row(const WeightView& w, std::int64_t o) {
  const std::byte* row = w.row(o);
  for (std::size_t off = 0; off < w.row_bytes; off += 64) prefetch_l2(row + off);
}

// Rows [o0, o1) (of a range ending at `end`) for every token through a
// multi-row kernel: each weight row is read and unpacked once per group of
// tokens, the groups near-equal in size (9 tokens as 5 + 4: a group of one
// pays the whole unpacking for one dot product).
void run_rows_multi(QuantDotRowsFn dot_rows, const WeightView& w, const std::vector<QuantActRow>& x,
                    const RowsView& y, std::int64_t n_blocks, std::int64_t o0, std::int64_t o1,
                    std::int64_t end) {
  const auto n_tokens = std::int64_t(x.size());
  const std::int64_t groups = (n_tokens + quant_dot_rows_max - 1) / quant_dot_rows_max;
  const std::int64_t base = n_tokens / groups, wider = n_tokens % groups;
  for (std::int64_t o = o0; o < o1; ++o) {
    if (o + prefetch_rows < end) prefetch_row(w, o + prefetch_rows);
    std::int64_t t = 0;
    for (std::int64_t g = 0; g < groups; ++g) {
      const int n = int(base + (g < wider ? 1 : 0));
      dot_rows(w.row(o), x.data() + t, n, n_blocks, y.row(t) + o, y.stride);
      t += n;
    }
  }
}

// Where a tile of n rows at row o of [o0, o1) (a range ending at `end`)
// runs: a tile that would pass the weight's last row moves down to end there
// (the rows it recomputes are not stored: `store` has a bit per row it
// stores); pf is the next tile's rows, fetched in step, while there is a next
// one in the range.
struct TilePlace {
  std::int64_t start;
  unsigned store;
  const std::byte* pf;
  std::size_t pf_bytes;
};
TilePlace place_tile(const WeightView& w, std::int64_t n, std::int64_t o, std::int64_t o1,
                     std::int64_t end) {
  const std::int64_t start = std::min(o, w.rows - n);
  const auto count = unsigned(std::min(o1 - o, n));
  const std::int64_t next = o + n, next_end = std::min(end, next + n);
  const bool ahead = next < next_end;
  return {start, ((1u << count) - 1u) << unsigned(o - start), ahead ? w.row(next) : nullptr,
          ahead ? std::size_t(next_end - next) * w.row_bytes : 0};
}

// One token over rows [o0, o1) (of a range ending at `end`) by 8-row tiles.
void run_rows_tile(QuantDotTileFn tile, const WeightView& w, const QuantActRow& x, float* y,
                   std::int64_t n_blocks, std::int64_t o0, std::int64_t o1, std::int64_t end) {
  for (std::int64_t o = o0; o < o1; o += quant_dot_tile_rows) {
    const TilePlace at = place_tile(w, quant_dot_tile_rows, o, o1, end);
    tile(w.row(at.start), w.row_bytes, x, n_blocks, y + at.start, at.store, at.pf, at.pf_bytes);
  }
}

// Every token over rows [o0, o1) (of a range ending at `end`) by tiles of
// Rows rows x up to TokensMax tokens (the 8-row token tiles, the 16-row
// lane tiles), the token groups near-equal in size (as run_rows_multi's); a
// tile's rows stay in the L1 while the groups after the first pass over
// them, and the first group fetches the next tile's rows.
template <std::int64_t Rows, int TokensMax, class TileFn>
void run_rows_token_tiles(TileFn tile, const WeightView& w, const std::vector<QuantActRow>& x,
                          const RowsView& y, std::int64_t n_blocks, std::int64_t o0,
                          std::int64_t o1, std::int64_t end) {
  const auto n_tokens = std::int64_t(x.size());
  const std::int64_t groups = (n_tokens + TokensMax - 1) / TokensMax;
  const std::int64_t base = n_tokens / groups, wider = n_tokens % groups;
  for (std::int64_t o = o0; o < o1; o += Rows) {
    const TilePlace at = place_tile(w, Rows, o, o1, end);
    std::int64_t t = 0;
    for (std::int64_t g = 0; g < groups; ++g) {
      const int tokens = int(base + (g < wider ? 1 : 0));
      tile(w.row(at.start), w.row_bytes, x.data() + t, tokens, n_blocks, y.row(t) + at.start,
           y.stride, at.store, g == 0 ? at.pf : nullptr, g == 0 ? at.pf_bytes : 0);
      t += tokens;
    }
  }
}

// Every token over rows [o0, o1) (of a range ending at `end`) by 16-row
// lane panels: each unpacks its rows once into `scratch` and runs every
// token group from there; the next panel's rows are fetched in step while
// this one unpacks.
void run_rows_panels(QuantDotLanePanelFn panel, const WeightView& w,
                     const std::vector<QuantActRow>& x, const RowsView& y, std::int64_t n_blocks,
                     std::int64_t o0, std::int64_t o1, std::int64_t end, void* scratch) {
  for (std::int64_t o = o0; o < o1; o += quant_dot_lane_tile_rows) {
    const TilePlace at = place_tile(w, quant_dot_lane_tile_rows, o, o1, end);
    panel(w.row(at.start), w.row_bytes, x.data(), int(x.size()), n_blocks, y.row(0) + at.start,
          y.stride, at.store, scratch, at.pf, at.pf_bytes);
  }
}

// The thread's panel buffer for n_blocks blocks of t, 64-byte aligned, in
// the pool's scratch for that thread.
void* panel_scratch(std::vector<float>& buf, model::DType t, std::int64_t n_blocks) {
  const std::size_t bytes = quant_dot_lane_panel_bytes(t, n_blocks) + 64;
  if (buf.size() * sizeof(float) < bytes) buf.resize((bytes + sizeof(float) - 1) / sizeof(float));
  const auto at = reinterpret_cast<std::uintptr_t>(buf.data());
  return reinterpret_cast<void*>((at + 63) / 64 * 64);
}

static_assert(std::size_t(quant_dot_lane_tile_rows) == row_grain,
              "a lane tile covers one scheduling grain");

}  // namespace

void quant_matmul(ConstRowsView x, const WeightView& w, RowsView y, ThreadPool& pool,
                  std::vector<float>& scratch, QuantDotPath path, QuantBatchTiles batch,
                  const CpuTuning& tuning) {
  quant_matmul_many(x, std::span(&w, 1), std::span(&y, 1), pool, scratch, path, batch, tuning);
}

void quant_matmul_many(ConstRowsView x, std::span<const WeightView> w,
                       std::span<const RowsView> y, ThreadPool& pool, std::vector<float>& scratch,
                       QuantDotPath path, QuantBatchTiles batch, const CpuTuning& tuning) {
  assert(w.size() == y.size() && w.size() <= quant_max_weights);
  QuantDotFn dot[quant_max_weights];
  QuantDotRowsFn dot_rows[quant_max_weights];
  QuantDotTileFn tile[quant_max_weights];
  QuantDotTokenTileFn token_tile[quant_max_weights];
  QuantDotLaneTileFn lane_tile[quant_max_weights];
  QuantDotLanePanelFn lane_panel[quant_max_weights];
  std::int64_t n_blocks[quant_max_weights];
  // The quantised activations per format: scratch holds the first format's,
  // `more` any other's (a mix of legacy and K-quant types, which the common
  // files do not have).
  std::vector<float> more[2];
  ActQuant kinds[3];
  QuantActs acts[3];
  std::size_t n_kinds = 0, act_of[quant_max_weights];
  // Row r of the concatenation is row r - first[i] of weight i; each
  // weight's range starts on a whole grain, so a grain never straddles two.
  std::size_t first[quant_max_weights + 1] = {0};
  double cost = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    assert(x.cols == w[i].cols && y[i].cols == w[i].rows && y[i].rows == x.rows);
    dot[i] = quant_dot_fn(w[i].dtype, path);
    dot_rows[i] = x.rows > 1 ? quant_dot_rows_fn(w[i].dtype, path) : nullptr;
    // Preferred: 16 rows in the lanes x 2 to 8 tokens (the K-quants), and
    // one token of the types the CPU's tuning names (cpu_tuning.hpp: on AMD
    // Zen 5 all three, one thread from the L2 reading Q4_K at 41.4 against
    // 28.4 GB/s through the 8-row tiles, 2026-12-06; on AMD Zen 4 Q4_K and
    // IQ4_XS).
    const bool lanes_for_one =
        batch == QuantBatchTiles::lane_tiles ||
        (batch == QuantBatchTiles::best && tuning.one_token_lane_tiles.has(w[i].dtype));
    lane_tile[i] = batch != QuantBatchTiles::token_tiles && (x.rows > 1 || lanes_for_one) &&
                           w[i].rows >= quant_dot_lane_tile_rows
                       ? quant_dot_lane_tile_fn(w[i].dtype, path, tuning.lane_tile_prefetch)
                       : nullptr;
    // One token otherwise: 8-row tiles where the weight has that many rows.
    tile[i] = x.rows == 1 && !lane_tile[i] && w[i].rows >= quant_dot_tile_rows
                  ? quant_dot_tile_fn(w[i].dtype, path)
                  : nullptr;
    // Several tokens: tiles of 8 rows x a few tokens where the path has them.
    token_tile[i] = x.rows > 1 && w[i].rows >= quant_dot_tile_rows
                        ? quant_dot_token_tile_fn(w[i].dtype, path)
                        : nullptr;
    // Lane panels, the rows unpacked once: more tokens than a lane tile
    // takes, any batch of a type with panels only (Q2_K, Q3_K, the legacy
    // blocks of 32), and one token of a legacy block type, which the panel
    // runs through its one-token lane tile (M-100 Q4_0, one token: 1.70-1.90
    // against 2.42-2.83 ms an iteration through the single-row dots,
    // alternated, 2026-12-06; the K-quants' one token takes their lane
    // tiles, where a panel was no faster).
    const bool legacy = model::dtype_block_elems(w[i].dtype) == 32;
    lane_panel[i] = (x.rows > 1 || (legacy && !tile[i])) && batch == QuantBatchTiles::best &&
                            w[i].rows >= quant_dot_lane_tile_rows &&
                            (!lane_tile[i] || x.rows > quant_dot_lane_tile_tokens_max)
                        ? quant_dot_lane_panel_fn(w[i].dtype, path, tuning.lane_panel_prefetch)
                        : nullptr;
    assert(dot[i] && "quant_matmul: a path this CPU lacks");
    n_blocks[i] = w[i].cols / model::dtype_block_elems(w[i].dtype);
    const ActQuant kind = act_quant_for(w[i].dtype);
    std::size_t k = 0;
    while (k < n_kinds && kinds[k] != kind) ++k;
    if (k == n_kinds) {
      kinds[k] = kind;
      acts[k] = quantize_act_rows(kind, x, k == 0 ? scratch : more[k - 1]);
      ++n_kinds;
    }
    act_of[i] = k;
    first[i + 1] = first[i] + (std::size_t(w[i].rows) + row_grain - 1) / row_grain * row_grain;
    cost += double(x.rows) * double(w[i].rows) * double(w[i].cols);
  }
  // Each format's rows, for the multi-row kernels.
  std::vector<QuantActRow> act_rows[3];
  for (std::size_t k = 0; k < n_kinds; ++k)
    for (std::int64_t t = 0; t < x.rows; ++t) act_rows[k].push_back(acts[k].row(t));
  pool.parallel_for(
      first[w.size()],
      [&](std::size_t begin, std::size_t end, std::size_t thread) {
        for (std::size_t i = 0; i < w.size(); ++i) {
          const auto b = std::int64_t(std::max(begin, first[i]) - first[i]);
          const auto e = std::min(std::int64_t(std::min(end, first[i + 1]) - first[i]), w[i].rows);
          for (std::int64_t o0 = b; o0 < e; o0 += std::int64_t(row_grain)) {
            const std::int64_t o1 = std::min(e, o0 + std::int64_t(row_grain));
            if (tile[i]) {
              run_rows_tile(tile[i], w[i], acts[act_of[i]].row(0), y[i].row(0), n_blocks[i], o0, o1,
                            e);
              continue;
            }
            if (lane_panel[i]) {
              run_rows_panels(lane_panel[i], w[i], act_rows[act_of[i]], y[i], n_blocks[i], o0, o1, e,
                              panel_scratch(pool.scratch(thread), w[i].dtype, n_blocks[i]));
              continue;
            }
            if (lane_tile[i]) {
              run_rows_token_tiles<quant_dot_lane_tile_rows, quant_dot_lane_tile_tokens_max>(
                  lane_tile[i], w[i], act_rows[act_of[i]], y[i], n_blocks[i], o0, o1, e);
              continue;
            }
            if (token_tile[i]) {
              run_rows_token_tiles<quant_dot_tile_rows, quant_dot_tile_tokens_max>(
                  token_tile[i], w[i], act_rows[act_of[i]], y[i], n_blocks[i], o0, o1, e);
              continue;
            }
            if (dot_rows[i]) {
              run_rows_multi(dot_rows[i], w[i], act_rows[act_of[i]], y[i], n_blocks[i], o0, o1, e);
              continue;
            }
            for (std::int64_t t = 0; t < x.rows; ++t) {
              const QuantActRow xr = acts[act_of[i]].row(t);
              float* out = y[i].row(t);
              for (std::int64_t o = o0; o < o1; ++o) {
                // The dots read one row at a time, a stream the hardware
                // prefetchers pick up late: ask for a row a few ahead.
                if (t == 0 && o + prefetch_rows < e) prefetch_row(w[i], o + prefetch_rows);
                out[o] = dot[i](w[i].row(o), xr, n_blocks[i]);
              }
            }
          }
        }
      },
      row_grain, cost);
}

}  // namespace pensieve::kernels::cpu
