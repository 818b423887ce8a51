#pragma once
// ConversationActor: one per live conversation. Owns the authoritative token
// history (what any recomputation starts from), the messages as text, the
// tenant and timestamps. A turn renders only the new messages through the
// chat template (client text never becomes control tokens), asks the
// scheduler to compute the tokens its KV does not cover, streams the reply
// out as whole UTF-8 characters with stop strings held back, and appends
// the reply's tokens (and the template's end-of-turn markup) to the history.
// Turns of one conversation run one after another, in arrival order.
//
// A stateless request (a client that sends the whole history, or a raw
// prompt) is the one turn of an anonymous conversation: an actor whose
// state keeps no KV and that ends after that turn.
//
// Runs on the control executor; the services it is given outlive it.
#include "actors/context_overflow.hpp"
#include "actors/conversation_protocol.hpp"
#include "actors/ids.hpp"
#include "gpu/text/chat_template.hpp"
#include "gpu/text/tokenizer.hpp"
#include "runtime/actor.hpp"
#include "runtime/error.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pensieve::actors {

class HistoryJournal;
class ReplyMemo;

// What every conversation shares: the model's text side and the scheduler.
struct TurnServices {
  const model::Tokenizer* tokenizer = nullptr;
  const model::ChatTemplate* chat = nullptr;
  rt::ActorRef<SchedulerMsg> scheduler;
  std::int32_t max_context = 0;
  ContextOverflow context_overflow = ContextOverflow::truncate;
  // Where acknowledged turns become durable (invariant 4); null: nowhere.
  HistoryJournal* journal = nullptr;
  // Stateless requests' generated ids (see ReplyMemo); null: none kept.
  ReplyMemo* replies = nullptr;
};

// Where a turn began: the history's messages, tokens and rendered text
// before it. An edited history falls back to the latest such point before
// its first difference, so the tokens before it (the replies as generated)
// are kept as they are, not re-encoded from their text.
struct TurnStart {
  std::uint32_t messages = 0;
  std::uint32_t tokens = 0;
  std::size_t rendered = 0;
};

// What the engine's registry reads of a stored conversation without asking
// its actor: turns sent to it and not yet ended (a conversation with one is
// never expired). The engine counts a turn in before sending it; the actor
// counts it out when it ends or is refused.
struct ConversationActivity {
  std::atomic<std::int32_t> turns_pending{0};
};

struct ConversationState {
  ConversationId id;
  std::string tenant;
  std::vector<model::ChatMessage> messages;  // as rendered so far (assistant replies as sent)
  std::vector<std::int32_t> tokens;          // the history the model saw and wrote
  // The text `tokens` stand for, as the model's (Jinja) template rendered it
  // (empty: not known, e.g. restored from the journal; built-in templates).
  std::string rendered;
  std::int64_t created_unix_s = 0;
  std::int64_t last_active_unix_s = 0;
  std::int32_t turns = 0;
  // The turn starts after the first, oldest first; cleared when the history
  // is encoded anew (a template restart, a truncation, a journal restore).
  std::vector<TurnStart> turn_starts;
  std::uint64_t journal_uid = 0;  // its name in the history journal; 0: not journaled
  bool keep_kv = true;            // false: an anonymous conversation (its KV ends with its turn)
  // An anonymous conversation's cache namespace: its turn's KV stays cached
  // as an unnamed path there (see TurnSpec). Nullopt: nothing stays.
  std::optional<std::string> cache_namespace;
  // A named conversation's: its turns share the cached prefixes of this
  // namespace (see TurnSpec::share_namespace). Nullopt: they share nothing.
  std::optional<std::string> share_namespace;
  // A stored conversation's activity, shared with the engine; null: anonymous.
  std::shared_ptr<ConversationActivity> activity;
  // Reloaded after it left memory: its history is taken from the journal
  // (by journal_uid) before its first message.
  bool load_from_journal = false;
};

// Runs one turn on `state`: `messages` are appended to the conversation,
// or, with `compare_history`, may be the client's whole version of it
// (turn_history() below says how they are read). Every outcome goes to
// `out` (TurnStarted, deltas, then TurnDone or TurnFailed); `state` changes
// only when the turn produced a reply (finished, stopped or cancelled).
boost::asio::awaitable<void> run_turn(const TurnServices& services, ConversationState& state,
                                      TurnId turn, std::vector<model::ChatMessage> messages,
                                      model::SamplingParams sampling, TurnEventChannel& out,
                                      const model::ChatExtras& chat = {}, bool compare_history = false);

// A turn's messages read against the stored history: the conversation as the
// turn sees it, and the part of the stored history it keeps.
struct TurnHistory {
  std::vector<model::ChatMessage> all;
  TurnStart base;  // `all`'s first base.messages are the stored ones, whose tokens are kept
};

// Without `compare_history`, or on an empty conversation, `messages` are new
// ones, appended. With it (an OpenAI client, which resends the history):
//   - messages that begin with the whole stored history resend it: only the
//     rest is new (and there must be some);
//   - messages that hold an assistant reply, or that begin with the stored
//     system prompt, are the client's edited history (a regenerated reply,
//     an edited message, dropped turns): they replace the stored history
//     from their first difference, falling back to the turn start before it;
//   - anything else is new messages, appended (so a client that sends only
//     its new user message may repeat an earlier one: regenerating the
//     first reply of a conversation without a system prompt, [user], reads
//     as that).
Result<TurnHistory> turn_history(const ConversationState& state, std::vector<model::ChatMessage> messages,
                                 bool compare_history);

// A completion's prompt: client text (encoded as such: no chat template, no
// control tokens) or token ids (used as they are once checked against the
// vocabulary).
using CompletionPrompt = std::variant<std::string, std::vector<std::int32_t>>;

// A plain completion (no chat template, no history kept); a prompt that is
// empty or names an id past the vocabulary is an invalid_request on `prompt`.
boost::asio::awaitable<void> run_completion(const TurnServices& services,
                                            const ConversationState& state, TurnId turn,
                                            CompletionPrompt prompt, model::SamplingParams sampling,
                                            std::int64_t pin_ttl_ns, TurnEventChannel& out);

class ConversationActor {
 public:
  ConversationActor(const TurnServices& services, ConversationState state)
      : services_(&services), state_(std::move(state)) {}

  boost::asio::awaitable<void> operator()(StartTurn m);
  boost::asio::awaitable<void> operator()(GetSnapshot m);
  // A turn refused by a stopping actor still gets its answer.
  void on_rejected(ConversationMsg& m);
  // Traces: a turn's span carries the turn's flow id, as the scheduler's
  // request phases do.
  std::string_view message_name(const ConversationMsg& m) const {
    return std::holds_alternative<StartTurn>(m) ? "turn" : "snapshot";
  }
  std::uint64_t message_flow_id(const ConversationMsg& m) const {
    const auto* turn = std::get_if<StartTurn>(&m);
    return turn ? turn->turn.value : 0;
  }

 private:
  // The history of a conversation reloaded from the journal; the error
  // when the journal cannot give it back.
  std::optional<std::string> load_from_journal();

  const TurnServices* services_;
  ConversationState state_;
};

}  // namespace pensieve::actors
