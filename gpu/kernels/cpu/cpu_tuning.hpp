#pragma once
// Kernel choices that differ between CPUs with the same instruction sets.
// The features (__builtin_cpu_supports) say which kernels can run; which of
// them runs fastest depends on the core: AMD Zen 4 executes AVX-512 on
// 256-bit halves, Zen 5 server cores on full 512-bit units, and the two
// fetch differently. Each choice here was measured on the CPU it names
// (bench/README.md, "CPU kernels per core"); a CPU not in the table takes
// the choices measured on most of them.
//
// None of these choices changes a bit of any result: the kernels they pick
// between compute the same numbers (the kernel tests check each against the
// scalar reference), so a choice is a matter of speed only.
#include "gpu/formats/tensor.hpp"

#include <cstdint>
#include <string>

namespace pensieve::kernels::cpu {

// Where a kernel's software prefetch of the next tile's weights puts them,
// and in what bursts: l1 and l2 each block's share of the next tile at the
// block's start; l1_by_group a quarter of that share at each of the block's
// four quant groups (a lane tile's only; a panel takes it as l1).
enum class PrefetchInto : std::uint8_t { l1, l2, l1_by_group };

// The CPU as CPUID leaf 0 and 1 describe it.
enum class CpuVendor : std::uint8_t { amd, intel, other };
struct CpuSignature {
  CpuVendor vendor = CpuVendor::other;
  unsigned family = 0;  // base family, plus the extended family where the base is 0xf
  unsigned model = 0;   // base model, plus the extended model (high nibble) for families 6 and 0xf
};

// vendor: the 12 characters of leaf 0 (EBX, EDX, ECX); eax: leaf 1's EAX.
CpuSignature decode_cpu_signature(const char (&vendor)[12], std::uint32_t eax);

// A subset of the K-quant types with lane tiles.
struct KQuantTypes {
  bool q4_k = false, q5_k = false, q6_k = false, iq4_xs = false;
  static constexpr KQuantTypes all() { return {true, true, true, true}; }
  bool has(model::DType t) const {
    return (t == model::DType::q4_k && q4_k) || (t == model::DType::q5_k && q5_k) ||
           (t == model::DType::q6_k && q6_k) || (t == model::DType::iq4_xs && iq4_xs);
  }
  bool any() const { return q4_k || q5_k || q6_k || iq4_xs; }
  friend bool operator==(const KQuantTypes&, const KQuantTypes&) = default;
};

struct CpuTuning {
  const char* name;  // "amd-zen5", "amd-zen4", "generic"
  // The K-quants whose one token goes through the 16-row lane tiles; the
  // others' through the 8-row tiles. Batches of 2 and more take the lane
  // tiles everywhere.
  KQuantTypes one_token_lane_tiles;
  // Where the lane tiles and the lane panels prefetch the next tile's rows.
  PrefetchInto lane_tile_prefetch;
  PrefetchInto lane_panel_prefetch;
};

// The table: AMD family 0x1a (Zen 5), AMD family 0x19 (Zen 3 and Zen 4;
// Zen 3 has no AVX-512, so only the choices' defaults matter there), and
// every other CPU.
CpuTuning cpu_tuning_for(const CpuSignature& cpu);

// This machine's signature (CPUID; the default signature off x86) and its
// tuning, read once per process.
CpuSignature host_cpu_signature();
const CpuTuning& host_cpu_tuning();

// "into the L1", "into the L2", "into the L1 by quant groups".
const char* prefetch_into_name(PrefetchInto p);

// "amd family 0x19 model 0x11" and the like.
std::string cpu_signature_name(const CpuSignature& cpu);

}  // namespace pensieve::kernels::cpu
