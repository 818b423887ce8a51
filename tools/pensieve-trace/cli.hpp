#pragma once
// The pensieve-trace command line, callable from tests: parses the arguments
// after the program name, runs one subcommand, writes its report to `out` and
// any problem, one line, to `err`. Exit codes: 0 done, 1 bad input (an
// unreadable or malformed trace, an unwritable output), 2 bad usage.
#include <ostream>
#include <string>
#include <vector>

namespace pensieve::tools::trace {

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace pensieve::tools::trace
