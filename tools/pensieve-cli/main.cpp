// pensieve-cli: a command-line client of the server's Cap'n Proto interface
// (see net/README.md): chat, list, history, delete, stats.
#include "tools/pensieve-cli/cli_commands.hpp"
#include "tools/pensieve-cli/cli_options.hpp"

#include <cstdio>
#include <iostream>

int main(int argc, char** argv) {
  using namespace pensieve::cli;
  auto options = parse_cli(std::vector<std::string>(argv + 1, argv + argc));
  if (!options) {
    std::fprintf(stderr, "pensieve-cli: %s\n%s", options.error().message.c_str(), cli_usage().c_str());
    return 2;
  }
  if (options->help) {
    std::cout << cli_usage();
    return 0;
  }
  return run_cli(*options, std::cin, std::cout, std::cerr);
}
