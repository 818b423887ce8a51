#include "gpu/kv/fp8_kv_row.hpp"

#include "gpu/kv/fp8_e4m3.hpp"
#include "gpu/kv/paged_kv_view.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace pensieve::kv {

void quantize_kv_row_fp8(const float* x, std::int64_t n, std::byte* out) {
  constexpr std::int64_t kValues = kFp8KvBlockValues;
  assert(n % kValues == 0 && "fp8 KV rows are whole blocks");
  for (std::int64_t b = 0; b < n / kValues; ++b) {
    const float* xb = x + b * kValues;
    std::byte* blk = out + std::size_t(b) * kFp8KvBlockBytes;
    float amax = 0.0f;
    for (std::int64_t i = 0; i < kValues; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float scale = fp8_e4m3_scale(amax);
    std::memcpy(blk, &scale, sizeof scale);
    auto* codes = reinterpret_cast<std::uint8_t*>(blk + sizeof scale);
    // A division, not a multiply by 1 / scale: the device kernel divides too,
    // and the two roundings would differ.
    for (std::int64_t i = 0; i < kValues; ++i) codes[i] = float_to_fp8_e4m3(xb[i] / scale);
  }
}

void widen_kv_row_fp8(const std::byte* row, std::int64_t first, std::int32_t n, float* dst) {
  constexpr std::int64_t kValues = kFp8KvBlockValues;
  for (std::int64_t i = first, end = first + n; i < end;) {
    const std::byte* blk = row + std::size_t(i / kValues) * kFp8KvBlockBytes;
    const std::int64_t in_block = i % kValues, run = std::min(end - i, kValues - in_block);
    float scale = 0.0f;
    std::memcpy(&scale, blk, sizeof scale);
    const auto* codes = reinterpret_cast<const std::uint8_t*>(blk + sizeof scale) + in_block;
    for (std::int64_t j = 0; j < run; ++j) dst[j] = fp8_e4m3_to_float(codes[j]) * scale;
    dst += run;
    i += run;
  }
}

}  // namespace pensieve::kv
