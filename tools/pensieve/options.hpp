#pragma once
// The command line of the `pensieve` server. Every flag is documented in
// usage(); a bad flag or value is a one-line Error.
#include "runtime/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::server {

struct Options {
  std::optional<std::string> model;  // absent: the built-in generated test model
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::uint16_t rpc_port = 8081;
  bool no_state = false;
  std::optional<std::string> api_key;
  std::optional<std::string> api_keys_file;
  std::int64_t kv_device_mb = 512;
  std::int64_t kv_host_mb = 2048;
  std::optional<std::string> kv_disk_dir;
  std::int64_t kv_disk_gb = 0;
  std::int32_t max_batch_tokens = 512;
  std::int32_t request_timeout_s = 600;
  std::int32_t threads = 0;  // 0: every core
  std::optional<std::string> trace_file;
  std::optional<std::string> chat_template;
  bool help = false;
};

std::string usage();

Result<Options> parse_options(const std::vector<std::string>& args);

}  // namespace pensieve::server
