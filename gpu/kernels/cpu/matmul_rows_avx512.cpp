// The float row kernels for AVX-512: the intrinsic tiles of dot_tile.hpp,
// gemm_tile.hpp and matmul_batch_tile.hpp.
// Everything that is not an ISA-namespaced kernel header (kernel_isa.hpp) is
// included before the target pragma, so its inline functions and the
// standard library's templates keep the build's baseline code: the linker
// may pick any one copy of those for the whole program.
#include "gpu/kernels/cpu/matmul_rows.hpp"

#if defined(__x86_64__)
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cpu/prefetch.hpp"
#include "gpu/kernels/cpu/views.hpp"

#include <immintrin.h>
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#define PENSIEVE_KERNEL_ISA 3
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include "gpu/kernels/cpu/matmul_rows_impl.hpp"
#pragma GCC pop_options
#endif

namespace pensieve::kernels::cpu {

MatmulRowsFn matmul_rows_avx512() {
#if defined(__x86_64__)
  return &matmul_rows_kernel;
#else
  return nullptr;
#endif
}

}  // namespace pensieve::kernels::cpu
