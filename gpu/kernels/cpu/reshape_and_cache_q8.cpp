#include "gpu/kernels/cpu/reshape_and_cache_q8.hpp"

#include "gpu/formats/half.hpp"
#include "gpu/kv/paged_kv_view.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace pensieve::kernels::cpu {

void quantize_kv_row_q8_0(const float* x, std::int64_t n, std::byte* out) {
  constexpr std::int64_t kValues = kv::kQ8KvBlockValues;
  assert(n % kv::kKvRowGranuleValues == 0 && "q8_0 KV rows are whole 32-value granules");
  for (std::int64_t first = 0; first < n; first += kValues) {
    // The last block holds 32 values when n is an odd multiple of 32.
    const std::int64_t count = std::min(kValues, n - first);
    const float* xb = x + first;
    std::byte* blk = out + kv::kv_values_bytes(kv::KvDType::q8_0, first);
    float amax = 0.0f;
    for (std::int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(xb[i]));
    // The factor is 1 / d before d's rounding to F16, as ggml's
    // quantize_row_q8_0 does; the quants are then read back with the F16 d.
    const float d = amax / 127.0f, inv = amax != 0.0f ? 127.0f / amax : 0.0f;
    const std::uint16_t d16 = f32_to_f16(d);
    std::memcpy(blk, &d16, sizeof d16);
    auto* q = reinterpret_cast<std::int8_t*>(blk + sizeof d16);
    // nearbyint: round to nearest even in the default environment.
    for (std::int64_t i = 0; i < count; ++i)
      q[i] = std::int8_t(std::clamp(std::nearbyint(xb[i] * inv), -127.0f, 127.0f));
  }
}

}  // namespace pensieve::kernels::cpu
