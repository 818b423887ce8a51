#include "gpu/kernels/cpu/cpu_tuning.hpp"

#include <cstdio>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace pensieve::kernels::cpu {

CpuSignature decode_cpu_signature(const char (&vendor)[12], std::uint32_t eax) {
  CpuSignature cpu;
  if (std::memcmp(vendor, "AuthenticAMD", 12) == 0)
    cpu.vendor = CpuVendor::amd;
  else if (std::memcmp(vendor, "GenuineIntel", 12) == 0)
    cpu.vendor = CpuVendor::intel;
  const unsigned base_family = (eax >> 8) & 0xfu, base_model = (eax >> 4) & 0xfu;
  const unsigned ext_family = (eax >> 20) & 0xffu, ext_model = (eax >> 16) & 0xfu;
  cpu.family = base_family == 0xfu ? base_family + ext_family : base_family;
  cpu.model = base_family == 0x6u || base_family == 0xfu ? (ext_model << 4) | base_model : base_model;
  return cpu;
}

CpuTuning cpu_tuning_for(const CpuSignature& cpu) {
  // Zen 5 (AMD EPYC, family 0x1a model 0x02, 2026-12-06): one token through
  // the lane tiles, one thread from DRAM 1.16-1.22x the 8-row tiles'
  // speed; their prefetch into the L1, 8 tokens from DRAM Q6_K 108 against
  // 119-133 us into the L2 (bench/results/2026-12-06-amd-zen5-one-token-lane-tiles.md).
  // IQ4_XS (605c7b6 and after) is not measured there: its 8-row tile.
  if (cpu.vendor == CpuVendor::amd && cpu.family >= 0x1au)
    return {
        "amd-zen5", {.q4_k = true, .q5_k = true, .q6_k = true}, PrefetchInto::l1, PrefetchInto::l1};
  // Zen 4 (AMD EPYC, family 0x19 model 0x11, 2026-12-07): a block's whole
  // share prefetched into the L1 at its start held the lane tiles to about
  // half of their speed from DRAM; a quarter at each quant group, or the L2,
  // did not (8 tokens, one thread: Q6_K 280 us a matrix, 132 by groups, 163
  // into the L2). The panels read faster prefetching into the L2 (16 tokens:
  // Q6_K 278 against 406 us). One token, one thread from DRAM, lane tiles by
  // groups against the 8-row tiles (one vpdpbusd per 64 weights): Q4_K
  // 25.2-25.7 against 15.8-17.1 GB/s, Q5_K 13.8-15.1 against about 19, Q6_K
  // 15.4-16.0 against 20.9-22.8; two threads, Q4_K 32.2-33.6 against
  // 28.9-32.3 (bench/results/2026-12-07-amd-zen4-kquant-tuning.md,
  // 2026-12-07-amd-zen4-one-token-tiles.md). IQ4_XS, the same: 19.7-21.4
  // against 12.2-13.9 (2026-12-07-amd-zen4-iq4-xs.md).
  if (cpu.vendor == CpuVendor::amd && cpu.family == 0x19u)
    return {
        "amd-zen4", {.q4_k = true, .iq4_xs = true}, PrefetchInto::l1_by_group, PrefetchInto::l2};
  // Intel and the rest: the 8-row tiles for one token, measured near the
  // read on an Intel Xeon (2026-12-02), and the L2, where every other tile
  // prefetches.
  return {"generic", {}, PrefetchInto::l2, PrefetchInto::l2};
}

CpuSignature host_cpu_signature() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return {};
  char vendor[12];
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  if (a < 1 || __get_cpuid(1, &a, &b, &c, &d) == 0) return decode_cpu_signature(vendor, 0);
  return decode_cpu_signature(vendor, a);
#else
  return {};
#endif
}

const CpuTuning& host_cpu_tuning() {
  // CPUID leaves the guest on a VM (a trap to the hypervisor): read once.
  static const CpuTuning tuning = cpu_tuning_for(host_cpu_signature());
  return tuning;
}

const char* prefetch_into_name(PrefetchInto p) {
  switch (p) {
    case PrefetchInto::l1:
      return "into the L1";
    case PrefetchInto::l2:
      return "into the L2";
    case PrefetchInto::l1_by_group:
      return "into the L1 by quant groups";
  }
  return "?";
}

std::string cpu_signature_name(const CpuSignature& cpu) {
  const char* vendor = cpu.vendor == CpuVendor::amd     ? "amd"
                       : cpu.vendor == CpuVendor::intel ? "intel"
                                                        : "other";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s family 0x%x model 0x%x", vendor, cpu.family, cpu.model);
  return buf;
}

}  // namespace pensieve::kernels::cpu
