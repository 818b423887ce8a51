#pragma once
// Ids that cross the actors' messages. Strong types, so a turn is never
// mistaken for a conversation.
#include <compare>
#include <cstdint>

namespace pensieve::actors {

// The engine's internal number of a conversation (clients name conversations
// by strings; the conversation store maps them).
struct ConversationId {
  std::uint64_t value = 0;
  friend constexpr auto operator<=>(ConversationId, ConversationId) = default;
};

struct TurnId {
  std::uint64_t value = 0;
  friend constexpr auto operator<=>(TurnId, TurnId) = default;
};

}  // namespace pensieve::actors
