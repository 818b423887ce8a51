// pensieve-bench: multi-turn conversation replay against OpenAI-compatible
// servers (see bench/README.md). The composition root: parses the command
// line and hands it to run_bench.
#include "bench/pensieve-bench/options.hpp"
#include "bench/pensieve-bench/sweep.hpp"

#include <cstdio>
#include <iostream>
#include <unistd.h>

int main(int argc, char** argv) {
  namespace pb = pensieve::bench;
  auto options = pb::parse_bench_options(std::vector<std::string>(argv + 1, argv + argc));
  if (!options) {
    std::fprintf(stderr, "pensieve-bench: %s\n", options.error().message.c_str());
    return 2;
  }
  if (options->help) {
    std::cout << pb::bench_usage();
    return 0;
  }
  // The live progress line only on a terminal: in logs it would be noise.
  std::FILE* progress = ::isatty(STDERR_FILENO) ? stderr : nullptr;
  auto out = pb::run_bench(*options, stdout, progress);
  if (!out) {
    std::fprintf(stderr, "pensieve-bench: %s\n", out.error().message.c_str());
    return 1;
  }
  std::printf("wrote %zu run files, %s and %s\n", out->run_files.size(), out->latency_plot.c_str(),
              out->ttft_plot.c_str());
  return 0;
}
