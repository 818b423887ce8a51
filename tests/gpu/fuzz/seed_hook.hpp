// One build of a fuzz target both writes its seed corpus and fuzzes:
// run_fuzz.sh starts the fuzzer once with PENSIEVE_FUZZ_WRITE_SEEDS=DIR, and
// libFuzzer's initialisation hook writes the seeds there and exits before any
// input runs. (A second build of each target for its seeds cost 10-16 s of
// clang per target in every CI run.)
#pragma once

#include <cstdlib>
#include <string>

// Defined by the target: writes its seed corpus into dir; 0 when it did.
int pensieve_fuzz_write_seeds(const std::string& dir);

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("PENSIEVE_FUZZ_WRITE_SEEDS"))
    std::exit(pensieve_fuzz_write_seeds(dir));
  return 0;
}
