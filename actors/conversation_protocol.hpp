#pragma once
// Messages to a conversation actor (actors/conversation.hpp): its variant inbox.
#include "actors/ids.hpp"
#include "actors/scheduler_protocol.hpp"
#include "gpu/text/chat_template.hpp"
#include "gpu/model/sampler.hpp"
#include "runtime/reply.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace pensieve::actors {

// A turn: `messages` are appended to the conversation, or, with `prompt`,
// a raw completion of it (no template, no history). Every event of the
// turn goes to `out`, the last one TurnDone or TurnFailed.
struct StartTurn {
  TurnId turn;
  std::vector<model::ChatMessage> messages;
  std::optional<std::string> prompt;
  model::SamplingParams sampling;
  std::shared_ptr<TurnEventChannel> out;
  model::ChatExtras chat;  // tools for the template
  bool compare_history = false;  // `messages` may resend the history (run_turn)
  // A stored conversation's cache namespace for this turn (its tenant and
  // the request's cache_salt): the turn shares cached prefixes of that
  // namespace only, and leaves its own KV findable there. Nullopt: unchanged.
  std::optional<std::string> share_namespace;
  // > 0: the prompt's KV stays pinned this long once computed (TurnSpec::pin_ttl_ns).
  std::int64_t pin_ttl_ns = 0;
  // A completion of token ids (TurnRequest::prompt_tokens); wins over `prompt`.
  std::optional<std::vector<std::int32_t>> prompt_tokens;
};

struct ConversationSnapshot {
  std::vector<model::ChatMessage> messages;
  std::vector<std::int32_t> tokens;
  std::int32_t turns = 0;
  std::int64_t last_active_unix_s = 0;
};

struct GetSnapshot {
  rt::Reply<ConversationSnapshot> reply;
};

using ConversationMsg = std::variant<StartTurn, GetSnapshot>;

}  // namespace pensieve::actors
