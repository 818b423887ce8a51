#pragma once
// The JSON body of one benchmark request. Stateless clients send the whole
// history (with the previous replies as the server returned them); stateful
// clients send only the new messages and name the conversation, whose
// history the server keeps.
#include "bench/pensieve-bench/dataset.hpp"
#include "bench/pensieve-bench/target.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::bench {

// The body field that names a conversation for a stateful server. The one
// place to change it when the conversations API (issue 6) settles.
inline constexpr const char* conversation_field = "conversation";

struct RequestSpec {
  std::string model;
  ClientMode mode = ClientMode::stateless;
  std::string conversation_id;              // stateful mode only
  const std::vector<DatasetMessage>* history = nullptr;  // earlier messages and replies
  const std::vector<DatasetMessage>* new_messages = nullptr;
  std::int32_t max_tokens = 1;
};

// Streams with usage, greedy, fixed length (ignore_eos).
std::string chat_request_body(const RequestSpec& spec);

}  // namespace pensieve::bench
