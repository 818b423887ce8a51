#include "gpu/kernels/cpu/quant_dot.hpp"

#include "gpu/kernels/cpu/q8_matmul.hpp"
#include "gpu/kernels/cpu/quant_dot_steps.hpp"
#include "gpu/kernels/cpu/weight_kernel_guard.hpp"

#include <cassert>

namespace pensieve::kernels::cpu {

using model::DType;
namespace qs = quant_steps;

constexpr const char* kernel_what = "a quantised-weight SIMD kernel";

namespace {

// Legacy blocks of 32: `quant(blk, j)` is element j's integer quant.
template <class Quant>
std::int32_t legacy_isum(const std::byte* blk, std::size_t qs_offset, const std::int8_t* xq,
                         const Quant& quant) {
  const std::uint8_t* q = block_bytes(blk + qs_offset);
  std::int32_t isum = 0;
  for (int j = 0; j < 16; ++j) {
    isum += quant(q[j] & 0xf, j) * xq[j];
    isum += quant(q[j] >> 4, j + 16) * xq[j + 16];
  }
  return isum;
}

int fifth(const std::byte* qh, int j) {
  return int((block_u32(qh) >> j) & 1u) << 4;
}

// K-quant isum: sum over sub-blocks of `sub` values of scale(j) * sum q * x.
template <int Sub, class Quant, class Scale>
std::int32_t k_isum(const std::byte* blk, const std::int8_t* xq, const Quant& quant,
                    const Scale& scale) {
  std::int32_t isum = 0;
  for (int j = 0; j < 256 / Sub; ++j) {
    std::int32_t s = 0;
    for (int l = 0; l < Sub; ++l) s += quant(blk, j * Sub + l) * xq[j * Sub + l];
    isum += scale(j) * s;
  }
  return isum;
}

}  // namespace

float quant_dot_q8_0(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  return q8_dot_reference(x.q, x.d, w, nb);
}

float quant_dot_q4_0(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 18;
    const std::int32_t isum = legacy_isum(blk, 2, x.q + b * 32, [](int q, int) { return q - 8; });
    qs::block(a, block_f16(blk) * x.d[b], isum);
  }
  return a.result();
}

float quant_dot_q4_1(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 20;
    const std::int32_t isum = legacy_isum(blk, 4, x.q + b * 32, [](int q, int) { return q; });
    qs::block(a, block_f16(blk) * x.d[b], isum);
    qs::mins(a, block_f16(blk + 2), x.s[b]);
  }
  return a.result();
}

float quant_dot_q5_0(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 22;
    const std::int32_t isum = legacy_isum(
        blk, 6, x.q + b * 32, [blk](int q, int j) { return (q | fifth(blk + 2, j)) - 16; });
    qs::block(a, block_f16(blk) * x.d[b], isum);
  }
  return a.result();
}

float quant_dot_q5_1(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 24;
    const std::int32_t isum =
        legacy_isum(blk, 8, x.q + b * 32, [blk](int q, int j) { return q | fifth(blk + 4, j); });
    qs::block(a, block_f16(blk) * x.d[b], isum);
    qs::mins(a, block_f16(blk + 2), x.s[b]);
  }
  return a.result();
}

float quant_dot_iq4_nl(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 18;
    const std::int32_t isum =
        legacy_isum(blk, 2, x.q + b * 32, [](int q, int) { return int(iq4nl_values[q]); });
    qs::block(a, block_f16(blk) * x.d[b], isum);
  }
  return a.result();
}

float quant_dot_q2_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 84;
    const std::uint8_t* scales = block_bytes(blk);
    const std::int32_t isum =
        k_isum<16>(blk, x.q + b * 256, q2_k_quant, [scales](int j) { return scales[j] & 0xf; });
    qs::block(a, x.d[b] * block_f16(blk + 80), isum);
    qs::mins(a, -(x.d[b] * block_f16(blk + 82)), float(qs::q2_k_mins(scales, x.bsums + b * 16)));
  }
  return a.result();
}

float quant_dot_q3_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 110;
    const std::uint8_t* scales = block_bytes(blk + 96);
    const std::int32_t isum = k_isum<16>(blk, x.q + b * 256, q3_k_quant,
                                         [scales](int j) { return q3_k_scale(scales, j); });
    qs::block(a, x.d[b] * block_f16(blk + 108), isum);
  }
  return a.result();
}

float quant_dot_q4_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 144;
    const std::uint8_t* scales = block_bytes(blk + 4);
    const std::int32_t isum = k_isum<32>(blk, x.q + b * 256, q4_k_quant,
                                         [scales](int j) { return k_scale_min(scales, j).scale; });
    qs::block(a, x.d[b] * block_f16(blk), isum);
    qs::mins(a, -(x.d[b] * block_f16(blk + 2)), float(qs::k4_mins(scales, x.bsums + b * 16)));
  }
  return a.result();
}

float quant_dot_q5_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 176;
    const std::uint8_t* scales = block_bytes(blk + 4);
    const std::int32_t isum = k_isum<32>(blk, x.q + b * 256, q5_k_quant,
                                         [scales](int j) { return k_scale_min(scales, j).scale; });
    qs::block(a, x.d[b] * block_f16(blk), isum);
    qs::mins(a, -(x.d[b] * block_f16(blk + 2)), float(qs::k4_mins(scales, x.bsums + b * 16)));
  }
  return a.result();
}

float quant_dot_q6_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 210;
    const auto* scales = reinterpret_cast<const std::int8_t*>(blk + 192);
    const std::int32_t isum =
        k_isum<16>(blk, x.q + b * 256, q6_k_quant, [scales](int j) { return int(scales[j]); });
    qs::block(a, x.d[b] * block_f16(blk + 208), isum);
  }
  return a.result();
}

float quant_dot_iq4_xs(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 136;
    const std::int32_t isum = k_isum<32>(
        blk, x.q + b * 256, [](const std::byte* q, int i) { return iq4_xs_value(q, i); },
        [blk](int j) { return iq4_xs_scale(blk, j); });
    qs::block(a, x.d[b] * block_f16(blk), isum);
  }
  return a.result();
}

namespace {

QuantDotFn scalar_fn(DType t) {
  switch (t) {
#define PENSIEVE_DOT_CASE(type) \
  case DType::type:             \
    return quant_dot_##type;
    PENSIEVE_QUANT_DOT_TYPES(PENSIEVE_DOT_CASE)
#undef PENSIEVE_DOT_CASE
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      break;
  }
  assert(false && "quant_dot_fn: not a quantised type");
  return nullptr;
}

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

// What quant_tiles_avx2.cpp's target attribute asks for.
bool cpu_has_avx2_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  return cpu_has_avx2() && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

// What quant_dot_avx512.cpp's target attribute asks for.
bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

QuantDotFn vector_fn(DType t, QuantDotPath path) {
  switch (path) {
    case QuantDotPath::avx2:
      return cpu_has_avx2() ? quant_dot_avx2_fn(t) : nullptr;
    case QuantDotPath::avx512:
      return cpu_has_avx512_vnni() ? quant_dot_avx512_fn(t) : nullptr;
    case QuantDotPath::best:
    case QuantDotPath::portable:
      break;
  }
  return nullptr;
}

}  // namespace

bool quant_dot_path_supported(QuantDotPath path) {
  switch (path) {
    case QuantDotPath::avx2:
      return cpu_has_avx2();
    case QuantDotPath::avx512:
      return cpu_has_avx512_vnni();
    case QuantDotPath::best:
    case QuantDotPath::portable:
      break;
  }
  return true;
}

QuantDotPath quant_dot_best_path(DType t) {
  for (QuantDotPath p : {QuantDotPath::avx512, QuantDotPath::avx2})
    if (vector_fn(t, p)) return p;
  return QuantDotPath::portable;
}

QuantDotFn quant_dot_fn(DType t, QuantDotPath path) {
  if (path == QuantDotPath::best) path = quant_dot_best_path(t);
  if (path == QuantDotPath::portable) return scalar_fn(t);
  return handed_out(vector_fn(t, path), kernel_what);
}

QuantDotRowsFn quant_dot_rows_fn(DType t, QuantDotPath path) {
  if (path == QuantDotPath::best) path = quant_dot_best_path(t);
  if (path != QuantDotPath::avx512 || !cpu_has_avx512_vnni()) return nullptr;
  return handed_out(quant_dot_avx512_rows_fn(t), kernel_what);
}

QuantDotTileFn quant_dot_tile_fn(DType t, QuantDotPath path) {
  if (path == QuantDotPath::best) path = quant_dot_best_path(t);
  if (path != QuantDotPath::avx512 || !cpu_has_avx512_vnni()) return nullptr;
  return handed_out(quant_dot_avx512_tile_fn(t), kernel_what);
}

QuantDotTokenTileFn quant_dot_token_tile_fn(DType t, QuantDotPath path) {
  if (path == QuantDotPath::best) path = quant_dot_best_path(t);
  if (path == QuantDotPath::avx512 && cpu_has_avx512_vnni())
    return handed_out(quant_dot_avx512_token_tile_fn(t), kernel_what);
  if (path == QuantDotPath::avx2 && cpu_has_avx2_f16c())
    return handed_out(quant_dot_avx2_token_tile_fn(t), kernel_what);
  return nullptr;
}

QuantDotLaneTileFn quant_dot_lane_tile_fn(DType t, QuantDotPath path, PrefetchInto pf) {
  if (path == QuantDotPath::best) path = quant_dot_best_path(t);
  if (path != QuantDotPath::avx512 || !cpu_has_avx512_vnni()) return nullptr;
  return handed_out(quant_dot_avx512_lane_tile_fn(t, pf), kernel_what);
}

QuantDotLanePanelFn quant_dot_lane_panel_fn(DType t, QuantDotPath path, PrefetchInto pf) {
  if (path == QuantDotPath::best) path = quant_dot_best_path(t);
  if (path != QuantDotPath::avx512 || !cpu_has_avx512_vnni()) return nullptr;
  return handed_out(quant_dot_avx512_lane_panel_fn(t, pf), kernel_what);
}

std::size_t quant_dot_lane_panel_bytes(DType t, std::int64_t n_blocks) {
  // A legacy block of 32 takes 11 vectors of 64 bytes (lane_tiles_avx512.cpp).
  const std::size_t per_block =
      model::dtype_block_elems(t) == 256 ? quant_dot_lane_panel_block_bytes : 11 * 64;
  return std::size_t(n_blocks) * per_block;
}

const char* quant_dot_path_name(QuantDotPath path) {
  switch (path) {
    case QuantDotPath::avx512:
      return "avx512-vnni";
    case QuantDotPath::avx2:
      return "avx2";
    case QuantDotPath::portable:
      return "portable";
    case QuantDotPath::best:
      break;
  }
  return "best";
}

bool quant_dot_vectorised(DType t) {
  return quant_dot_best_path(t) != QuantDotPath::portable;
}

const char* quant_dot_isa() {
  return cpu_has_avx512_vnni() ? "avx512-vnni" : cpu_has_avx2() ? "avx2" : "portable";
}

}  // namespace pensieve::kernels::cpu
