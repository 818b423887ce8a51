// The portable float row kernels: the tiles' scalar twins, whatever the
// build's flags (a native build compiles them with its -march, but they stay
// the scalar code the other paths are tested against).
#include "gpu/kernels/cpu/matmul_rows.hpp"

#define PENSIEVE_KERNEL_ISA 1
#include "gpu/kernels/cpu/matmul_rows_impl.hpp"

namespace pensieve::kernels::cpu {

MatmulRowsFn matmul_rows_portable() {
  return &matmul_rows_kernel;
}

}  // namespace pensieve::kernels::cpu
