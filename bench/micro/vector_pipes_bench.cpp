// Which vector instructions share the vpdpbusd pipes: 12 independent
// vpdpbusd (register operands) a step, alone or with 6 (12 for the cheap
// ops) independent instructions of one other kind, written in asm so that
// the compiler adds nothing (no spills, no copies). A step of 12 vpdpbusd
// alone takes 6 cycles at 2 a cycle (12 chains cover their latency); a
// companion that runs on other pipes leaves the step at that time, one that
// shares them adds half a cycle each.
// This is the cost model behind the K-quant lane tiles' per-token bound
// (bench/results/2026-12-07-amd-zen5-kquant-tile-limits.md): their sub-block
// scales (vpmulld), mins (vpdpwssd) and float accumulation (vfmadd231ps,
// vmulps) compete with the dot products for the same two pipes on AMD Zen 5.
// GCC only (the asm uses its {1to16} escape); x86-64 with AVX-512 VNNI.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <iterator>

namespace {

#if defined(__AVX512VNNI__) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)

#define PV_DP(i) "vpdpbusd %%zmm31, %%zmm30, %%zmm" #i "\n"
#define PV_DP12 \
  PV_DP(0)      \
  PV_DP(1)      \
  PV_DP(2) PV_DP(3) PV_DP(4) PV_DP(5) PV_DP(6) PV_DP(7) PV_DP(8) PV_DP(9) PV_DP(10) PV_DP(11)
#define PV_DPB(i, off) "vpdpbusd " #off "(%1)%{1to16%}, %%zmm30, %%zmm" #i "\n"
#define PV_CLOBBERS                                                                               \
  "memory", "cc", "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", \
      "zmm10", "zmm11", "zmm12", "zmm13", "zmm14", "zmm15", "zmm16", "zmm17", "zmm18", "zmm19",   \
      "zmm20", "zmm21", "zmm22", "zmm23"

alignas(64) std::int8_t operand_bytes[256];
constexpr std::uint32_t one_f32_bits = 0x3f800000;

// The sources (zmm30, zmm31) hold 1.0f in every lane, so that the float
// companions never meet denormals or NaNs (an assist on some cores), and
// every destination starts from zero.
#define PV_Z(i) "vpxord %%zmm" #i ", %%zmm" #i ", %%zmm" #i "\n"
#define PV_INIT                                                                                    \
  "vpbroadcastd %2, %%zmm30\nvmovdqa64 %%zmm30, %%zmm31\n" PV_Z(0) PV_Z(1) PV_Z(2) PV_Z(3) PV_Z(4) \
      PV_Z(5) PV_Z(6) PV_Z(7) PV_Z(8) PV_Z(9) PV_Z(10) PV_Z(11) PV_Z(12) PV_Z(13) PV_Z(14)         \
          PV_Z(15) PV_Z(16) PV_Z(17) PV_Z(18) PV_Z(19) PV_Z(20) PV_Z(21) PV_Z(22) PV_Z(23)

// The step loops: n steps of `body`.
#define PV_LOOP(name, body)                              \
  void name(long n) {                                    \
    asm volatile(PV_INIT "1:\n" body "dec %0\njnz 1b\n"  \
                 : "+r"(n)                               \
                 : "r"(operand_bytes), "r"(one_f32_bits) \
                 : PV_CLOBBERS, "zmm30", "zmm31");       \
  }

// Companions on zmm12 and up: op(i) writes zmm i.
#define PV_SIX(op) op(12) op(13) op(14) op(15) op(16) op(17)
#define PV_TWELVE(op) PV_SIX(op) op(18) op(19) op(20) op(21) op(22) op(23)
#define PV_MULLD(i) "vpmulld %%zmm31, %%zmm30, %%zmm" #i "\n"
#define PV_DPWSSD(i) "vpdpwssd %%zmm31, %%zmm30, %%zmm" #i "\n"
#define PV_FMA(i) "vfmadd231ps %%zmm31, %%zmm30, %%zmm" #i "\n"
#define PV_SRLD(i) "vpsrld $4, %%zmm30, %%zmm" #i "\n"
#define PV_SHUFI(i) "vshufi64x2 $0x88, %%zmm31, %%zmm30, %%zmm" #i "\n"
#define PV_INSERT(i) "vinserti64x4 $1, " #i "*8(%1), %%zmm30, %%zmm" #i "\n"
#define PV_CVT(i) "vcvtdq2ps %%zmm30, %%zmm" #i "\n"
#define PV_AND(i) "vpandd %%zmm31, %%zmm30, %%zmm" #i "\n"
#define PV_UNPCK(i) "vpunpckldq %%zmm31, %%zmm30, %%zmm" #i "\n"

PV_LOOP(alone, PV_DP12)
PV_LOOP(with_vpmulld, PV_DP12 PV_SIX(PV_MULLD))
PV_LOOP(with_vpdpwssd, PV_DP12 PV_SIX(PV_DPWSSD))
PV_LOOP(with_vfmadd, PV_DP12 PV_SIX(PV_FMA))
PV_LOOP(with_vpsrld, PV_DP12 PV_SIX(PV_SRLD))
PV_LOOP(with_vshufi64x2, PV_DP12 PV_SIX(PV_SHUFI))
PV_LOOP(with_vinserti64x4, PV_DP12 PV_SIX(PV_INSERT))
PV_LOOP(with_vcvtdq2ps, PV_DP12 PV_SIX(PV_CVT))
PV_LOOP(with_12_vpandd, PV_DP12 PV_TWELVE(PV_AND))
PV_LOOP(with_12_vpunpckldq, PV_DP12 PV_TWELVE(PV_UNPCK))
// Two companions at once: whether the core issues more than two zmm
// instructions a cycle in all (AMD Zen 4 does not: 36 in 18 cycles).
PV_LOOP(with_12_vpandd_12_vpunpckldq, PV_DP12 PV_TWELVE(PV_AND) PV_TWELVE(PV_UNPCK))
PV_LOOP(with_12_vpandd_6_vpsrld, PV_DP12 PV_TWELVE(PV_AND) PV_SIX(PV_SRLD))

// The lane tiles' form: the activation's 4 bytes broadcast from memory.
#define PV_DPB12                                                                                  \
  PV_DPB(0, 0)                                                                                    \
  PV_DPB(1, 4) PV_DPB(2, 8) PV_DPB(3, 12) PV_DPB(4, 16) PV_DPB(5, 20) PV_DPB(6, 24) PV_DPB(7, 28) \
      PV_DPB(8, 32) PV_DPB(9, 36) PV_DPB(10, 40) PV_DPB(11, 44)
PV_LOOP(broadcast_operands, PV_DPB12)

struct Mix {
  const char* label;
  void (*run)(long);
};
constexpr Mix mixes[] = {
    {"12 vpdpbusd", alone},
    {"12 vpdpbusd {1to16} memory operand", broadcast_operands},
    {"12 vpdpbusd + 6 vpmulld", with_vpmulld},
    {"12 vpdpbusd + 6 vpdpwssd", with_vpdpwssd},
    {"12 vpdpbusd + 6 vfmadd231ps", with_vfmadd},
    {"12 vpdpbusd + 6 vpsrld", with_vpsrld},
    {"12 vpdpbusd + 6 vshufi64x2", with_vshufi64x2},
    {"12 vpdpbusd + 6 vinserti64x4 (memory)", with_vinserti64x4},
    {"12 vpdpbusd + 6 vcvtdq2ps", with_vcvtdq2ps},
    {"12 vpdpbusd + 12 vpandd", with_12_vpandd},
    {"12 vpdpbusd + 12 vpunpckldq", with_12_vpunpckldq},
    {"12 vpdpbusd + 12 vpandd + 12 vpunpckldq", with_12_vpandd_12_vpunpckldq},
    {"12 vpdpbusd + 12 vpandd + 6 vpsrld", with_12_vpandd_6_vpsrld},
};

constexpr long steps_per_call = 4096;

// Arg: the mix. Counter "ns/step": the time of one step.
void BM_VnniPipeMix(benchmark::State& state) {
  const Mix& mix = mixes[state.range(0)];
  for (auto _ : state) mix.run(steps_per_call);
  state.counters["ns/step"] =
      benchmark::Counter(double(state.iterations()) * steps_per_call,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(mix.label);
}
BENCHMARK(BM_VnniPipeMix)->DenseRange(0, int(std::size(mixes)) - 1);

#else

void BM_VnniPipeMix(benchmark::State& state) {
  state.SkipWithError("skipped: GCC x86-64 builds with AVX-512 VNNI only");
}
BENCHMARK(BM_VnniPipeMix)->Arg(0);

#endif

}  // namespace
