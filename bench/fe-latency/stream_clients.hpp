#pragma once
// Streaming OpenAI clients for load: each sends `stream: true` chat
// completions back to back (keep-alive while the server allows) until the
// run ends, and checks every reply ends with `data: [DONE]`. Runs them all on
// one io_context in the calling thread.
#include <chrono>
#include <cstdint>
#include <string>

namespace pensieve::bench {

struct StreamLoad {
  std::uint64_t ok = 0, failed = 0;
  std::string first_error;
};

// `model`: the served model's name, which every request names.
StreamLoad run_stream_clients(std::uint16_t port, int clients, std::chrono::seconds duration, int max_tokens,
                              const std::string& model);

}  // namespace pensieve::bench
