#include "actors/conversation.hpp"

#include "actors/history_journal.hpp"
#include "actors/reply_memo.hpp"
#include "gpu/text/stop_matcher.hpp"
#include "gpu/text/utf8_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>

namespace pensieve::actors {

namespace asio = boost::asio;

namespace {

std::int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// False when the client has left (its stream closed the channel). Sized for
// the whole turn, so never full.
bool send(TurnEventChannel& out, TurnEvent e) {
  return out.try_send(boost::system::error_code{}, std::move(e));
}

void send_error(TurnEventChannel& out, TurnErrorKind kind, std::string message, std::string param = {}) {
  (void)send(out, TurnFailed{TurnError{kind, std::move(message), std::move(param)}});
}

asio::awaitable<void> cancel_turn(const TurnServices& svc, TurnId turn) {
  CancelTurn cancel{turn};
  (void)co_await svc.scheduler.tell(cancel);  // a stopping scheduler ends the turn anyway
}

std::vector<model::TextPiece> pieces_of(const std::vector<model::ChatSegment>& segments) {
  std::vector<model::TextPiece> pieces;
  for (const auto& s : segments) pieces.push_back({s.text, s.markup});
  return pieces;
}

// The tokens that close the assistant's turn after what it generated: the
// template's suffix, minus the end token when the model wrote it itself.
std::vector<std::int32_t> closing_tokens(const TurnServices& svc, std::span<const std::int32_t> generated) {
  std::string suffix = svc.chat->assistant_suffix();
  if (!generated.empty() && svc.tokenizer->is_special(generated.back())) {
    const std::string end = svc.tokenizer->token_to_piece(generated.back(), true);
    if (const auto at = suffix.find(end); !end.empty() && at != std::string::npos) {
      suffix = suffix.substr(at + end.size());
    }
  }
  const model::TextPiece piece{suffix, true};
  return svc.tokenizer->encode_pieces(std::span(&piece, 1), false);
}

// Turns sampled tokens into the text the client may see.
class ReplyText {
 public:
  ReplyText(const model::Tokenizer& tokenizer, std::vector<std::string> stops)
      : tokenizer_(tokenizer), stops_(std::move(stops)) {}

  // Returns false once a stop string has matched (the reply ends there).
  bool push(const model::SampledToken& t, bool logprobs) {
    const std::string piece =
        tokenizer_.is_special(t.token) ? std::string() : tokenizer_.token_to_piece(t.token);
    model::StopStep step = stops_.push(utf8_.feed(piece));
    pending_.text += step.released;
    text_ += step.released;
    if (logprobs) pending_.tokens.push_back(t);
    return !step.stopped;
  }
  // The end of the reply: release what was held back unless a stop matched.
  void finish() {
    if (stops_.stopped()) return;
    model::StopStep step = stops_.push(utf8_.flush());
    pending_.text += step.released;
    text_ += step.released;
    if (!step.stopped) {
      std::string rest = stops_.flush();
      pending_.text += rest;
      text_ += rest;
    }
  }
  bool stopped() const { return stops_.stopped(); }
  bool has_pending() const { return !pending_.text.empty() || !pending_.tokens.empty(); }
  TurnDelta take() { return std::exchange(pending_, {}); }
  const std::string& text() const { return text_; }

 private:
  const model::Tokenizer& tokenizer_;
  model::Utf8Stream utf8_;
  model::StopMatcher stops_;
  TurnDelta pending_;
  std::string text_;  // the whole reply released so far
};

}  // namespace

namespace {

// What a turn's generation left behind, for its conversation.
struct Generated {
  std::vector<std::int32_t> tokens;  // sampled tokens the reply keeps
  std::string text;                  // the text the client saw
  TurnEvent done = TurnDone{};       // the acknowledgement, for the caller to send
};

// What the turn makes of `state`'s history, for the journal: the history
// from `base` on (its messages) and from `tokens_kept` on (its tokens) is
// replaced by what the turn holds past them.
JournalRecord turn_record(const ConversationState& state, const std::vector<model::ChatMessage>& messages,
                          const std::vector<std::int32_t>& tokens, std::uint32_t messages_kept,
                          std::uint32_t tokens_kept, std::int64_t now_unix_s) {
  JournalTurn t;
  t.uid = state.journal_uid;
  t.last_active_unix_s = now_unix_s;
  t.turns = state.turns + 1;
  t.messages_before = messages_kept;
  t.tokens_before = tokens_kept;
  t.retokenized = tokens_kept != state.tokens.size();
  t.messages_replaced = messages_kept != state.messages.size();
  t.messages.assign(messages.begin() + std::ptrdiff_t(messages_kept), messages.end());
  t.tokens.assign(tokens.begin() + std::ptrdiff_t(tokens_kept), tokens.end());
  return t;
}

bool same_message(const model::ChatMessage& a, const model::ChatMessage& b) {
  return a.role == b.role && a.content == b.content && a.tool_calls == b.tool_calls &&
         a.tool_call_id == b.tool_call_id && a.name == b.name;
}

// The prompt of a turn: the kept tokens of the history, then the encoding of
// what the template adds to them.
struct Prompt {
  std::vector<std::int32_t> tokens;
  std::uint32_t tokens_kept = 0;  // of the stored history's
  bool restart = false;           // encoded anew: nothing of the stored tokens is kept as is
  std::string text;               // what `tokens` stand for (Jinja)
};

Result<Prompt> encode_prompt(const TurnServices& svc, const ConversationState& state,
                             const std::vector<model::ChatMessage>& all, const TurnStart& base,
                             const model::ChatExtras& chat) {
  const std::string_view held = std::string_view(state.rendered).substr(0, base.rendered);
  auto next = svc.chat->continuation(all, base.messages, held, true, chat);
  if (!next) return next.error();
  // A restart (the template renders the earlier messages differently now)
  // encodes the whole conversation again; the scheduler keeps the KV of
  // the longest token prefix it shares with what the conversation held.
  Prompt p;
  p.restart = next->restart;
  p.tokens_kept = next->restart ? 0 : base.tokens;
  p.tokens.assign(state.tokens.begin(), state.tokens.begin() + std::ptrdiff_t(p.tokens_kept));
  const bool bos = p.tokens.empty() && svc.tokenizer->adds_bos_by_default();
  const auto pieces = pieces_of(next->segments);
  // A stateless turn's resent replies map back to the ids generated for them
  // (ReplyMemo), so the history lands on its cached path token for token.
  const auto fresh = svc.replies && state.cache_namespace
                         ? svc.replies->encode(*svc.tokenizer, *state.cache_namespace, all, pieces, bos)
                         : svc.tokenizer->encode_pieces(pieces, bos);
  p.tokens.insert(p.tokens.end(), fresh.begin(), fresh.end());
  p.text = std::move(next->text);
  return p;
}

// ContextOverflow::truncate: drops the oldest whole turns of `all` (a user
// message and what follows it up to the next one), never the leading system
// messages nor the turn being asked (from the last user message on), until
// the prompt and max_tokens fit the context or nothing is left to drop. The
// history is then encoded anew: every kept token's position moved.
Result<void> truncate_to_fit(const TurnServices& svc, const ConversationState& state,
                             std::vector<model::ChatMessage>& all, TurnStart& base, Prompt& prompt,
                             std::int32_t max_tokens, const model::ChatExtras& chat) {
  std::size_t system = 0;
  while (system < all.size() && all[system].role == "system") ++system;
  std::size_t asked = all.size() - 1;
  for (std::size_t i = all.size(); i-- > system;) {
    if (all[i].role == "user") {
      asked = i;
      break;
    }
  }
  while (std::int64_t(prompt.tokens.size()) + max_tokens > svc.max_context && system < asked) {
    std::size_t end = system + 1;
    while (end < asked && all[end].role != "user") ++end;
    all.erase(all.begin() + std::ptrdiff_t(system), all.begin() + std::ptrdiff_t(end));
    asked -= end - system;
    base = TurnStart{};
    auto again = encode_prompt(svc, state, all, base, chat);
    if (!again) return again.error();
    prompt = std::move(*again);
    prompt.restart = true;
  }
  return {};
}

// Admits `tokens` (the whole history, new prompt last) to the scheduler and
// streams the reply to `out`. Sends TurnStarted, deltas or the failure;
// returns the reply, with the TurnDone the caller sends, when there was one.
// A stop string that matched, or a client that left, cancels the turn.
asio::awaitable<std::optional<Generated>> generate(const TurnServices& svc,
                                                   const ConversationState& state, TurnId turn,
                                                   const std::vector<std::int32_t>& tokens,
                                                   model::SamplingParams sampling, std::int64_t pin_ttl_ns,
                                                   TurnEventChannel& out) {
  const std::int64_t needed = std::int64_t(tokens.size()) + sampling.max_tokens;
  if (needed > svc.max_context) {
    send_error(out, TurnErrorKind::invalid_request,
               "this model's context is " + std::to_string(svc.max_context) + " tokens; the conversation has " +
                   std::to_string(tokens.size()) + " and max_tokens asks for " +
                   std::to_string(sampling.max_tokens));
    co_return std::nullopt;
  }
  const auto executor = co_await asio::this_coro::executor;
  auto events =
      std::make_shared<TurnEventChannel>(executor, turn_channel_capacity(sampling.max_tokens));
  const std::vector<std::string> stop_strings = sampling.stop_strings;
  const bool logprobs = sampling.logprobs;
  AdmitTurn admit{TurnSpec{turn, state.id, tokens, std::move(sampling), state.keep_kv, state.cache_namespace,
                           state.keep_kv ? state.share_namespace : std::nullopt, pin_ttl_ns},
                  events, {}};
  auto admitted = co_await svc.scheduler.ask(std::move(admit));
  if (!admitted) {
    send_error(out, TurnErrorKind::overloaded, "the server is stopping");
    co_return std::nullopt;
  }
  switch (*admitted) {
    case AdmitStatus::admitted: break;
    case AdmitStatus::overloaded:
      send_error(out, TurnErrorKind::overloaded, "the server is overloaded: too many turns are queued; retry later");
      co_return std::nullopt;
    case AdmitStatus::too_large:
      send_error(out, TurnErrorKind::invalid_request,
                 "the conversation (" + std::to_string(tokens.size()) +
                     " tokens plus max_tokens) needs more KV cache than the server has");
      co_return std::nullopt;
    case AdmitStatus::pin_refused:
      send_error(out, TurnErrorKind::invalid_request,
                 "pinning this prompt's " + std::to_string(tokens.size()) +
                     " tokens would take the pinned KV blocks past the server's cap; unpin or wait for pins to expire",
                 "cache_control");
      co_return std::nullopt;
  }

  ReplyText reply(*svc.tokenizer, stop_strings);
  Generated result;
  TurnDone done;
  done.prompt_tokens = std::int32_t(tokens.size());
  bool cancelled = false;  // CancelTurn sent
  for (;;) {
    auto [ec, e] = co_await events->async_receive(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      send_error(out, TurnErrorKind::internal, "turn events broken: " + ec.message());
      co_return std::nullopt;
    }
    bool client_left = false;
    if (auto* started = std::get_if<TurnStarted>(&e)) {
      started->prompt_tokens = done.prompt_tokens;
      done.cached_tokens = started->cached_tokens;
      client_left = !send(out, *started);
    } else if (std::holds_alternative<TurnFailed>(e)) {
      (void)send(out, std::move(e));
      co_return std::nullopt;
    } else if (auto* sampled = std::get_if<TurnDelta>(&e)) {
      if (reply.stopped()) continue;  // sampled before the scheduler saw the stop
      bool stopped = false;
      for (const model::SampledToken& t : sampled->tokens) {
        result.tokens.push_back(t.token);
        stopped = !reply.push(t, logprobs) || stopped;
      }
      if (stopped && !cancelled) {
        cancelled = true;
        co_await cancel_turn(svc, turn);
      }
      if (reply.has_pending() && !reply.stopped()) {
        TurnDelta delta = reply.take();
        delta.computed_ns = sampled->computed_ns;
        client_left = !send(out, std::move(delta));
      }
    } else {
      // TurnDone; finish none means cancelled (by the client or by our stop string).
      const TurnDone& end = std::get<TurnDone>(e);
      if (end.stop_token && !reply.stopped()) result.tokens.push_back(end.stop_token->token);
      done.finish = reply.stopped() ? model::FinishReason::stop : end.finish;
      done.cancelled = !reply.stopped() && end.finish == model::FinishReason::none;
      if (done.finish == model::FinishReason::none) done.finish = model::FinishReason::stop;
      done.timings = end.timings;
      break;
    }
    if (client_left && !cancelled) {
      cancelled = true;
      co_await cancel_turn(svc, turn);
    }
  }
  reply.finish();
  if (reply.has_pending()) (void)send(out, reply.take());
  done.completion_tokens = std::int32_t(result.tokens.size());
  result.text = reply.text();
  result.done = done;
  co_return result;
}

}  // namespace

Result<TurnHistory> turn_history(const ConversationState& state, std::vector<model::ChatMessage> messages,
                                 bool compare_history) {
  if (messages.empty()) return fail("a turn needs at least one new message");
  const std::size_t stored = state.messages.size();
  const TurnStart whole{std::uint32_t(stored), std::uint32_t(state.tokens.size()), state.rendered.size()};
  TurnHistory h;
  std::size_t common = 0;
  if (compare_history) {
    while (common < stored && common < messages.size() && same_message(state.messages[common], messages[common])) {
      ++common;
    }
  }
  const bool has_reply = std::any_of(messages.begin(), messages.end(),
                                     [](const model::ChatMessage& m) { return m.role == "assistant"; });
  if (compare_history && stored > 0 && common == stored) {
    if (messages.size() == stored) {
      return fail("a turn needs at least one new message: the request resends the conversation's " +
                  std::to_string(stored) + " messages and adds none");
    }
    h.all = std::move(messages);
    h.base = whole;
  } else if (compare_history && stored > 0 && (has_reply || (common > 0 && state.messages[0].role == "system"))) {
    h.all = std::move(messages);
    for (const TurnStart& t : state.turn_starts) {
      if (t.messages <= common) h.base = t;
    }
  } else {
    h.all = state.messages;
    h.all.insert(h.all.end(), std::make_move_iterator(messages.begin()), std::make_move_iterator(messages.end()));
    h.base = whole;
  }
  return h;
}

asio::awaitable<void> run_turn(const TurnServices& svc, ConversationState& state, TurnId turn,
                               std::vector<model::ChatMessage> messages,
                               model::SamplingParams sampling, TurnEventChannel& out,
                               const model::ChatExtras& chat, bool compare_history, std::int64_t pin_ttl_ns) {
  if (auto problem = model::validate(sampling); !problem.empty()) {
    send_error(out, TurnErrorKind::invalid_request, problem);
    co_return;
  }
  auto history = turn_history(state, std::move(messages), compare_history);
  if (!history) {
    send_error(out, TurnErrorKind::invalid_request, history.error().message);
    co_return;
  }
  std::vector<model::ChatMessage> all = std::move(history->all);
  TurnStart base = history->base;
  auto prompt = encode_prompt(svc, state, all, base, chat);
  if (!prompt) {
    send_error(out, TurnErrorKind::invalid_request, prompt.error().message);
    co_return;
  }
  const std::size_t asked_tokens = prompt->tokens.size();
  if (state.keep_kv && svc.context_overflow == ContextOverflow::truncate) {
    auto cut = truncate_to_fit(svc, state, all, base, *prompt, sampling.max_tokens, chat);
    if (!cut) {
      send_error(out, TurnErrorKind::invalid_request, cut.error().message);
      co_return;
    }
  }
  const auto truncated = std::int32_t(asked_tokens - prompt->tokens.size());
  std::vector<std::int32_t> tokens = std::move(prompt->tokens);
  // The done event goes out before the history grows: the conversation's
  // next turn waits in this actor's mailbox until this handler returns.
  auto reply = co_await generate(svc, state, turn, tokens, std::move(sampling), pin_ttl_ns, out);
  if (!reply) co_return;
  if (svc.replies && state.cache_namespace) {
    svc.replies->remember(*svc.tokenizer, *state.cache_namespace, reply->text, reply->tokens);
  }
  if (auto* done = std::get_if<TurnDone>(&reply->done)) done->truncated_tokens = truncated;
  // The history grows by the turn as the model saw it, and its reply.
  tokens.insert(tokens.end(), reply->tokens.begin(), reply->tokens.end());
  const auto closing = closing_tokens(svc, reply->tokens);
  tokens.insert(tokens.end(), closing.begin(), closing.end());
  std::string rendered;
  if (svc.chat->is_jinja()) rendered = prompt->text + reply->text + svc.chat->assistant_suffix();
  all.push_back({"assistant", std::move(reply->text)});
  const std::int64_t now = unix_now_s();
  // Invariant 4: a turn is acknowledged (done) only once its history is
  // durable. If the journal fails, the client gets an error instead; the
  // turn stays in memory (its reply was streamed and its KV kept).
  if (svc.journal != nullptr && state.journal_uid != 0) {
    const JournalRecord record = turn_record(state, all, tokens, base.messages, prompt->tokens_kept, now);
    const Result<void> durable = co_await svc.journal->commit(record);
    if (!durable) {
      reply->done =
          TurnFailed{TurnError{TurnErrorKind::internal,
                               "the turn could not be made durable: " + durable.error().message}};
    }
  }
  (void)send(out, std::move(reply->done));
  // The turn starts past this turn's base are gone with the history they
  // pointed into; one encoded anew keeps none.
  std::erase_if(state.turn_starts, [&](const TurnStart& t) { return t.messages >= base.messages; });
  if (prompt->restart) {
    state.turn_starts.clear();
  } else if (base.messages > 0) {
    state.turn_starts.push_back(base);
  }
  state.tokens = std::move(tokens);
  state.rendered = std::move(rendered);
  state.messages = std::move(all);
  state.last_active_unix_s = now;
  ++state.turns;
}

namespace {

// The ids a completion's prompt asks for, or the message saying why not.
std::variant<std::vector<std::int32_t>, std::string> completion_tokens(const TurnServices& svc,
                                                                       CompletionPrompt& prompt) {
  if (auto* ids = std::get_if<std::vector<std::int32_t>>(&prompt)) {
    if (ids->empty()) return std::string("the prompt is empty");
    const auto vocab = std::int64_t(svc.tokenizer->vocab_size());
    for (std::size_t i = 0; i < ids->size(); ++i) {
      if ((*ids)[i] < 0 || (*ids)[i] >= vocab) {
        return "prompt[" + std::to_string(i) + "] = " + std::to_string((*ids)[i]) +
               " is not a token id of this model (0 to " + std::to_string(vocab - 1) + ")";
      }
    }
    return std::move(*ids);
  }
  // Raw text: no template, and no control tokens from the client.
  const model::TextPiece piece{std::get<std::string>(prompt), false};
  auto tokens = svc.tokenizer->encode_pieces(std::span(&piece, 1), svc.tokenizer->adds_bos_by_default());
  if (tokens.empty()) return std::string("the prompt is empty");
  return tokens;
}

}  // namespace

asio::awaitable<void> run_completion(const TurnServices& svc, const ConversationState& state,
                                     TurnId turn, CompletionPrompt prompt,
                                     model::SamplingParams sampling, std::int64_t pin_ttl_ns,
                                     TurnEventChannel& out) {
  if (auto problem = model::validate(sampling); !problem.empty()) {
    send_error(out, TurnErrorKind::invalid_request, problem);
    co_return;
  }
  auto tokens = completion_tokens(svc, prompt);
  if (auto* problem = std::get_if<std::string>(&tokens)) {
    send_error(out, TurnErrorKind::invalid_request, std::move(*problem), "prompt");
    co_return;
  }
  auto reply = co_await generate(svc, state, turn, std::get<std::vector<std::int32_t>>(tokens), std::move(sampling),
                                 pin_ttl_ns, out);
  if (reply) (void)send(out, std::move(reply->done));
}

namespace {

// Counts a turn out of its conversation's activity however its handler ends.
struct TurnCountedOut {
  ConversationActivity* activity;
  ~TurnCountedOut() {
    if (activity != nullptr) activity->turns_pending.fetch_sub(1, std::memory_order_acq_rel);
  }
};

}  // namespace

// On the control executor, which is also the journal's ring executor (the
// journal's copy of its histories is read there only).
std::optional<std::string> ConversationActor::load_from_journal() {
  if (!state_.load_from_journal) return std::nullopt;
  state_.load_from_journal = false;
  if (services_->journal == nullptr) return std::nullopt;
  // Null: created, and left memory before its create record was written
  // (it had no turn then: a conversation with a turn running stays).
  const Result<const JournaledConversation*> loaded = services_->journal->load(state_.journal_uid);
  if (!loaded) return loaded.error().message;
  const JournaledConversation* c = *loaded;
  if (c == nullptr) return std::nullopt;
  state_.messages = c->messages;
  state_.tokens = c->tokens;
  state_.turns = c->turns;
  state_.last_active_unix_s = c->last_active_unix_s;
  return std::nullopt;
}

asio::awaitable<void> ConversationActor::operator()(StartTurn m) {
  const TurnCountedOut counted{state_.activity.get()};
  if (auto problem = load_from_journal()) {
    send_error(*m.out, TurnErrorKind::internal, "the conversation's history could not be reloaded: " + *problem);
    co_return;
  }
  if (state_.keep_kv && m.share_namespace) state_.share_namespace = std::move(m.share_namespace);
  if (m.prompt_tokens) {
    co_await run_completion(*services_, state_, m.turn, std::move(*m.prompt_tokens), std::move(m.sampling),
                            m.pin_ttl_ns, *m.out);
  } else if (m.prompt) {
    co_await run_completion(*services_, state_, m.turn, std::move(*m.prompt), std::move(m.sampling),
                            m.pin_ttl_ns, *m.out);
  } else {
    co_await run_turn(*services_, state_, m.turn, std::move(m.messages), std::move(m.sampling),
                      *m.out, m.chat, m.compare_history, m.pin_ttl_ns);
  }
}

asio::awaitable<void> ConversationActor::operator()(GetSnapshot m) {
  (void)load_from_journal();  // a history it cannot reload answers as empty; its turns say why
  m.reply.send(ConversationSnapshot{state_.messages, state_.tokens, state_.turns, state_.last_active_unix_s});
  co_return;
}

void ConversationActor::on_rejected(ConversationMsg& m) {
  if (auto* turn = std::get_if<StartTurn>(&m)) {
    if (state_.activity) state_.activity->turns_pending.fetch_sub(1, std::memory_order_acq_rel);
    send_error(*turn->out, TurnErrorKind::not_found, "the conversation was deleted");
  }
}

}  // namespace pensieve::actors
