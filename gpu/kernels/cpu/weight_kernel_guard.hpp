#pragma once
// Internal to gpu/kernels/cpu: the asan-ci build (gpu/CMakeLists.txt) leaves
// the quantised-weight SIMD kernels uninstrumented, since the only suites it
// builds never run them. The dispatchers that hand one out (quant_dot.cpp,
// q8_matmul.cpp) pass it through here, so that a test that comes to use one
// stops, rather than run unchecked code under a sanitizer.
#include <cstdio>
#include <cstdlib>

namespace pensieve::kernels::cpu {

// fn itself; in an asan-ci build, an abort naming `what` when fn is a kernel.
template <class Fn>
Fn handed_out(Fn fn, const char* what) {
#if defined(PENSIEVE_WEIGHT_KERNELS_UNINSTRUMENTED)
  if (fn) {
    std::fprintf(
        stderr,
        "pensieve: %s, uninstrumented in this asan-ci build: run this test with the asan preset\n",
        what);
    std::abort();
  }
#else
  (void)what;
#endif
  return fn;
}

}  // namespace pensieve::kernels::cpu
