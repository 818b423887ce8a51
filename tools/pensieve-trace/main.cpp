// pensieve-trace: export, summarise and draw the trace files that
// `pensieve --trace FILE` writes (runtime/trace.hpp, schemas/trace.capnp).
#include "tools/pensieve-trace/cli.hpp"

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return pensieve::tools::trace::run_cli(args, std::cout, std::cerr);
}
