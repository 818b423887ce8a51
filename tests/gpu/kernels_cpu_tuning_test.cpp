// The CPU signature from CPUID's words and the kernel choices per core
// (gpu/kernels/cpu/cpu_tuning.hpp). That a choice keeps every bit is checked
// where the kernels are (kernels_quant_lane_tile_test.cpp: quant_matmul under
// each tuning against the 8-row tiles and the reference).
#include "gpu/kernels/cpu/cpu_tuning.hpp"

#include <catch2/catch.hpp>

#include <cstring>

namespace kc = pensieve::kernels::cpu;

namespace {

kc::CpuSignature decode(const char* vendor, std::uint32_t eax) {
  char v[12];
  std::memcpy(v, vendor, 12);
  return kc::decode_cpu_signature(v, eax);
}

}  // namespace

TEST_CASE("CPUID's leaf 1 decodes to family and model, extended where the base family says",
          "[kernels][cpu_tuning]") {
  // AMD EPYC Zen 5 (Turin): base family 0xf + extended 0x0b, model 0x02.
  const kc::CpuSignature zen5 = decode("AuthenticAMD", 0x00b00f21);
  CHECK(zen5.vendor == kc::CpuVendor::amd);
  CHECK(zen5.family == 0x1a);
  CHECK(zen5.model == 0x02);
  // AMD EPYC Zen 4 (Genoa): 0xf + 0x0a, model 0x11 (extended model 1).
  const kc::CpuSignature zen4 = decode("AuthenticAMD", 0x00a10f11);
  CHECK(zen4.family == 0x19);
  CHECK(zen4.model == 0x11);
  // Intel Sapphire Rapids: family 6, model 0x8f (extended model 8).
  const kc::CpuSignature spr = decode("GenuineIntel", 0x000806f8);
  CHECK(spr.vendor == kc::CpuVendor::intel);
  CHECK(spr.family == 0x6);
  CHECK(spr.model == 0x8f);
  // A base family other than 6 and 0xf takes neither extension.
  const kc::CpuSignature old = decode("GenuineIntel", 0x00ff0543);
  CHECK(old.family == 0x5);
  CHECK(old.model == 0x4);
  CHECK(decode("HygonGenuine", 0x00900f01).vendor == kc::CpuVendor::other);
  CHECK(kc::cpu_signature_name(zen4) == "amd family 0x19 model 0x11");
}

TEST_CASE(
    "the tuning table: Zen 5 takes one K-quant token through the lane tiles prefetching into "
    "the L1, Zen 4 Q4_K's and IQ4_XS's through the lane tiles (Q5_K's and Q6_K's the 8-row "
    "tiles) with the lane tiles prefetching into the L1 by groups and the panels into the L2, "
    "every other CPU the 8-row tiles and the L2",
    "[kernels][cpu_tuning]") {
  const kc::CpuTuning zen5 = kc::cpu_tuning_for({kc::CpuVendor::amd, 0x1a, 0x02});
  CHECK(std::strcmp(zen5.name, "amd-zen5") == 0);
  CHECK(zen5.one_token_lane_tiles == kc::KQuantTypes{.q4_k = true, .q5_k = true, .q6_k = true});
  CHECK(zen5.lane_tile_prefetch == kc::PrefetchInto::l1);
  CHECK(zen5.lane_panel_prefetch == kc::PrefetchInto::l1);
  const kc::CpuTuning zen4 = kc::cpu_tuning_for({kc::CpuVendor::amd, 0x19, 0x11});
  CHECK(std::strcmp(zen4.name, "amd-zen4") == 0);
  CHECK(zen4.one_token_lane_tiles.has(pensieve::model::DType::q4_k));
  CHECK_FALSE(zen4.one_token_lane_tiles.has(pensieve::model::DType::q5_k));
  CHECK_FALSE(zen4.one_token_lane_tiles.has(pensieve::model::DType::q6_k));
  CHECK(zen4.one_token_lane_tiles.has(pensieve::model::DType::iq4_xs));
  CHECK_FALSE(zen4.one_token_lane_tiles.has(pensieve::model::DType::q8_0));
  CHECK(zen4.lane_tile_prefetch == kc::PrefetchInto::l1_by_group);
  CHECK(zen4.lane_panel_prefetch == kc::PrefetchInto::l2);
  for (const kc::CpuSignature& cpu : {kc::CpuSignature{kc::CpuVendor::intel, 0x6, 0x8f},
                                      kc::CpuSignature{kc::CpuVendor::amd, 0x17, 0x31},
                                      kc::CpuSignature{}}) {
    const kc::CpuTuning t = kc::cpu_tuning_for(cpu);
    INFO(kc::cpu_signature_name(cpu));
    CHECK(std::strcmp(t.name, "generic") == 0);
    CHECK_FALSE(t.one_token_lane_tiles.any());
    CHECK(t.lane_tile_prefetch == kc::PrefetchInto::l2);
    CHECK(t.lane_panel_prefetch == kc::PrefetchInto::l2);
  }
}

TEST_CASE("this machine's tuning is the table's entry for its signature", "[kernels][cpu_tuning]") {
  const kc::CpuSignature cpu = kc::host_cpu_signature();
  const kc::CpuTuning& host = kc::host_cpu_tuning();
  const kc::CpuTuning expected = kc::cpu_tuning_for(cpu);
  INFO(kc::cpu_signature_name(cpu) << ": " << host.name);
  CHECK(std::strcmp(host.name, expected.name) == 0);
  CHECK(host.one_token_lane_tiles == expected.one_token_lane_tiles);
  CHECK(host.lane_tile_prefetch == expected.lane_tile_prefetch);
  CHECK(host.lane_panel_prefetch == expected.lane_panel_prefetch);
  CHECK(&host == &kc::host_cpu_tuning());
#if defined(__x86_64__)
  CHECK(cpu.family != 0);
#endif
}
