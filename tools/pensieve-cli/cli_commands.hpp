#pragma once
// pensieve-cli's commands over the Cap'n Proto interface. run_cli() connects
// (its own kj event loop on the calling thread), runs one command and
// returns the process exit code: 0, or 1 with a one-line reason on `err`.
//
// chat reads `in` line by line (a terminal or a pipe), sends each non-empty
// line as a user turn and writes the reply to `out` as it streams, one line
// per reply; the conversation id and each turn's usage go to `err`.
#include "tools/pensieve-cli/cli_options.hpp"

#include <iosfwd>

namespace pensieve::cli {

int run_cli(const CliOptions& options, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace pensieve::cli
