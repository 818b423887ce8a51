#pragma once
// One turn between a front end and the engine: the request that starts it
// (TurnRequest) and the one event variant (TurnEvent) that flows back, from
// the scheduler through the conversation actor to the front end's adapter:
//
//   TurnStarted             once, when the scheduler first plans the turn
//   TurnDelta ...           sampled tokens; text once the conversation has
//                           released it (whole UTF-8 characters, no stop string)
//   TurnDone | TurnFailed   last: how it ended, or why it could not run
//
// Errors keep their kind (TurnErrorKind) all the way, so each front end maps
// them to its protocol in one table (net/turn_call.hpp).
#include "gpu/text/chat_template.hpp"
#include "gpu/model/sampler.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace pensieve::actors {

struct TurnRequest {
  std::string tenant;
  // The stored conversation the turn continues, created if it does not
  // exist yet; absent: an anonymous conversation that ends with the turn.
  std::optional<std::string> conversation;
  // False: the conversation must exist already (a front end whose clients
  // create conversations explicitly); a missing one is not_found.
  bool create_conversation = true;
  // The new messages (a stored conversation) or the whole history (an
  // anonymous one). Ignored when `prompt` is set.
  std::vector<model::ChatMessage> messages;
  // A stored conversation's `messages` may be the client's whole history,
  // resent, edited or cut (an OpenAI client resends it every turn): the
  // conversation keeps what they share with its own and continues from the
  // first difference (actors/conversation.hpp, turn_history). False: they
  // are only the new ones (the WebSocket and RPC front ends).
  bool compare_history = false;
  // A raw text completion: no chat template, an anonymous conversation only.
  std::optional<std::string> prompt;
  // A completion of these token ids (no tokenizer, no BOS added; each must be
  // below the vocabulary's size): an anonymous conversation only. Wins over
  // `prompt` and `messages`.
  std::optional<std::vector<std::int32_t>> prompt_tokens;
  // The request's tools and tool_choice, for the model's template.
  model::ChatExtras chat;
  // The request's cache namespace within its tenant (vLLM's cache_salt):
  // its prompt reuses only KV that requests and conversation turns with the
  // same tenant and salt left. A stored conversation's own KV is its own
  // whatever the salt; the salt decides which other cached prefixes
  // (a system prompt) its turn may share.
  std::optional<std::string> cache_salt;
  // > 0 (the request's cache_control): once computed, the prompt's full KV
  // blocks stay cached this many seconds, whatever memory pressure comes;
  // refused (invalid_request, param cache_control) past the pins' cap.
  std::int64_t pin_ttl_s = 0;
  // Sampling and the request's options (logprobs, stop strings).
  model::SamplingParams sampling;
};

enum class TurnErrorKind : std::uint8_t {
  invalid_request,
  not_found,
  overloaded,
  rate_limited,  // the tenant's own limit (net/tenant_limits.hpp), not the server's
  timeout,
  internal
};

struct TurnError {
  TurnErrorKind kind = TurnErrorKind::internal;
  std::string message;
  std::string param = {};  // the offending request field, when one is to blame
};

struct TurnStarted {
  std::int32_t prompt_tokens = 0;
  std::int32_t cached_tokens = 0;  // prompt tokens whose KV was reused
};

// Sampled tokens and, past the conversation actor, the text they released:
// `tokens` carry their logprobs (the conversation keeps them only when the
// request asked for logprobs).
struct TurnDelta {
  std::string text;
  std::vector<model::SampledToken> tokens;
  std::int64_t computed_ns = 0;  // steady clock: when its newest token was sampled
};

// Steady-clock points of the turn as the scheduler saw it; 0: not reached.
struct TurnTimings {
  std::int64_t admitted_ns = 0;
  std::int64_t planned_ns = 0;  // its first chunk went into an iteration
  std::int64_t first_token_ns = 0;
  std::int64_t finished_ns = 0;
};

struct TurnDone {
  model::FinishReason finish = model::FinishReason::none;
  std::int32_t prompt_tokens = 0;
  std::int32_t completion_tokens = 0;
  std::int32_t cached_tokens = 0;
  // History tokens the turn dropped to fit the context (ContextOverflow::truncate).
  std::int32_t truncated_tokens = 0;
  bool cancelled = false;
  TurnTimings timings;
  // From the scheduler only: the end token the sampler stopped at (EOS, a
  // stop id). It joins the history, never the text.
  std::optional<model::SampledToken> stop_token;
};

struct TurnFailed {
  TurnError error;
};

using TurnEvent = std::variant<TurnStarted, TurnDelta, TurnDone, TurnFailed>;

inline bool ends_turn(const TurnEvent& e) {
  return std::holds_alternative<TurnDone>(e) || std::holds_alternative<TurnFailed>(e);
}

}  // namespace pensieve::actors
