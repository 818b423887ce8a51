#pragma once
// pensieve-cli's command line:
//   pensieve-cli [--host H] [--port P] chat [--conversation ID] [--max-tokens N]
//                [--temperature T] [--seed S]
//   pensieve-cli [--host H] [--port P] list | history ID | delete ID | stats
#include "runtime/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::cli {

struct CliOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8081;
  std::string command;                      // chat, list, history, delete, stats
  std::optional<std::string> conversation;  // chat: resume; history/delete: the id
  std::int32_t max_tokens = 256;
  float temperature = 0.7f;
  std::uint64_t seed = 0;
  std::optional<std::string> api_key;       // login(key) first (servers with API keys)
  bool help = false;
};

Result<CliOptions> parse_cli(const std::vector<std::string>& args);
std::string cli_usage();

}  // namespace pensieve::cli
