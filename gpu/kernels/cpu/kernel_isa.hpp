// The instruction set the float and Q8_0 tile headers (dot_tile.hpp,
// gemm_tile.hpp, matmul_batch_tile.hpp, lane_sums.hpp, q8_tiles.hpp) are
// compiled for in this translation unit, and the namespace that keeps each
// set's copies of their inline functions apart (internal to gpu/kernels/cpu).
//
// A kernel file of one instruction set (matmul_rows_avx512.cpp, ...) defines
// PENSIEVE_KERNEL_ISA before it includes them, under a `#pragma GCC target`
// for that set; GCC's C++ front end does not update __AVX512F__ & co. after
// such a pragma, hence a macro of our own. Any other file gets what its
// compiler flags give. The namespace matters because the linker keeps one
// copy of an inline function: an AVX-512 copy of hsum16 chosen for a
// portable caller would fault on a CPU without AVX-512.
//
// Deliberately without an include guard: each header re-reads it, and a
// file defines PENSIEVE_KERNEL_ISA once, before the first of them.
#ifndef PENSIEVE_KERNEL_ISA
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__) && \
    defined(__FMA__)
#define PENSIEVE_KERNEL_ISA 3
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define PENSIEVE_KERNEL_ISA 2
#else
#define PENSIEVE_KERNEL_ISA 1
#endif
#endif

// Levels: 1 portable (scalar code), 2 AVX2 + FMA + F16C (the portable code
// compiled for them), 3 AVX-512 F/BW/VL + F16C + FMA (the intrinsic tiles).
#if PENSIEVE_KERNEL_ISA == 3
#define PENSIEVE_KERNEL_NS isa_avx512
#elif PENSIEVE_KERNEL_ISA == 2
#define PENSIEVE_KERNEL_NS isa_avx2
#else
#define PENSIEVE_KERNEL_NS isa_portable
#endif
