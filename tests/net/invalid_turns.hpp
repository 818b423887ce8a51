#pragma once
// One set of out-of-bounds requests, sent through every front end: each
// must come back as the same error kind (invalid_request) with the
// adapter's message (net/turn_call.hpp's validate_turn), whatever the wire.
#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::testing {

struct InvalidTurn {
  std::string field;  // the request field set out of bounds ("role": the message's role)
  std::int64_t number_value =
      0;  // its value, for a number field (integral: valid for every field's type)
  std::string message;
  bool has_role = false;  // the case needs a message role (RPC turns have none)
};

inline std::vector<InvalidTurn> invalid_turns() {
  return {
      {"temperature", 3, "'temperature' must be between 0 and 2"},
      {"top_p", 0, "'top_p' must be greater than 0"},
      {"max_tokens", 0, "'max_tokens' must be between 1 and 4096"},
      {"role", 0, "'messages[0].role' must be system, user, assistant or tool", true},
  };
}

}  // namespace pensieve::testing
