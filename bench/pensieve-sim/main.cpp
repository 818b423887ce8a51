// pensieve-sim: see sim_options.cpp's usage() and bench/README.md.
#include "bench/pensieve-sim/sim_runner.hpp"

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto options = pensieve::sim::parse_cli(args);
  if (!options) {
    std::fprintf(stderr, "pensieve-sim: %s\n", options.error().message.c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(pensieve::sim::usage(), stdout);
    return 0;
  }
  auto run = pensieve::sim::run_cli(*options);
  if (!run) {
    std::fprintf(stderr, "pensieve-sim: %s\n", run.error().message.c_str());
    return 1;
  }
  std::fputs(run->c_str(), stdout);
  return 0;
}
