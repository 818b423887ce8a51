#include "actors/conversation.hpp"

#include "actors/history_journal.hpp"
#include "actors/reply_memo.hpp"
#include "gpu/text/stop_matcher.hpp"
#include "gpu/text/utf8_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
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

void send_error(TurnEventChannel& out, TurnErrorKind kind, std::string message) {
  (void)send(out, TurnFailed{TurnError{kind, std::move(message)}});
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

// What the turn adds to `state`'s history, for the journal.
// `tokens_kept`: how many of the history's tokens the turn keeps (all of
// them, unless the template re-rendered the conversation).
JournalRecord turn_record(const ConversationState& state, const std::vector<model::ChatMessage>& messages,
                          const std::vector<std::int32_t>& tokens, std::uint32_t tokens_kept,
                          std::int64_t now_unix_s) {
  JournalTurn t;
  t.uid = state.journal_uid;
  t.last_active_unix_s = now_unix_s;
  t.turns = state.turns + 1;
  t.messages_before = std::uint32_t(state.messages.size());
  t.tokens_before = tokens_kept;
  t.retokenized = tokens_kept != state.tokens.size();
  t.messages.assign(messages.begin() + std::ptrdiff_t(state.messages.size()), messages.end());
  t.tokens.assign(tokens.begin() + std::ptrdiff_t(tokens_kept), tokens.end());
  return t;
}

// Admits `tokens` (the whole history, new prompt last) to the scheduler and
// streams the reply to `out`. Sends TurnStarted, deltas or the failure;
// returns the reply, with the TurnDone the caller sends, when there was one.
// A stop string that matched, or a client that left, cancels the turn.
asio::awaitable<std::optional<Generated>> generate(const TurnServices& svc,
                                                   const ConversationState& state, TurnId turn,
                                                   const std::vector<std::int32_t>& tokens,
                                                   model::SamplingParams sampling,
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
  AdmitTurn admit{TurnSpec{turn, state.id, tokens, std::move(sampling), state.keep_kv, state.cache_namespace},
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

asio::awaitable<void> run_turn(const TurnServices& svc, ConversationState& state, TurnId turn,
                               std::vector<model::ChatMessage> messages,
                               model::SamplingParams sampling, TurnEventChannel& out,
                               const model::ChatExtras& chat) {
  if (auto problem = model::validate(sampling); !problem.empty()) {
    send_error(out, TurnErrorKind::invalid_request, problem);
    co_return;
  }
  if (messages.empty()) {
    send_error(out, TurnErrorKind::invalid_request, "a turn needs at least one new message");
    co_return;
  }
  std::vector<model::ChatMessage> all = state.messages;
  all.insert(all.end(), messages.begin(), messages.end());
  auto next = svc.chat->continuation(all, state.messages.size(), state.rendered, true, chat);
  if (!next) {
    send_error(out, TurnErrorKind::invalid_request, next.error().message);
    co_return;
  }
  // A restart (the template renders the earlier messages differently now)
  // encodes the whole conversation again; the scheduler keeps the KV of
  // the longest token prefix it shares with what the conversation held.
  std::vector<std::int32_t> tokens = next->restart ? std::vector<std::int32_t>{} : state.tokens;
  const bool bos = tokens.empty() && svc.tokenizer->adds_bos_by_default();
  const auto pieces = pieces_of(next->segments);
  const auto fresh = svc.replies && state.cache_namespace
                         ? svc.replies->encode(*svc.tokenizer, *state.cache_namespace, all, pieces, bos)
                         : svc.tokenizer->encode_pieces(pieces, bos);
  tokens.insert(tokens.end(), fresh.begin(), fresh.end());
  const std::uint32_t tokens_kept = next->restart ? 0 : std::uint32_t(state.tokens.size());
  // The done event goes out before the history grows: the conversation's
  // next turn waits in this actor's mailbox until this handler returns.
  auto reply = co_await generate(svc, state, turn, tokens, std::move(sampling), out);
  if (!reply) co_return;
  if (svc.replies && state.cache_namespace) {
    svc.replies->remember(*svc.tokenizer, *state.cache_namespace, reply->text, reply->tokens);
  }
  // The history grows by the turn as the model saw it, and its reply.
  tokens.insert(tokens.end(), reply->tokens.begin(), reply->tokens.end());
  const auto closing = closing_tokens(svc, reply->tokens);
  tokens.insert(tokens.end(), closing.begin(), closing.end());
  std::string rendered;
  if (svc.chat->is_jinja()) rendered = next->text + reply->text + svc.chat->assistant_suffix();
  all.push_back({"assistant", std::move(reply->text)});
  const std::int64_t now = unix_now_s();
  // Invariant 4: a turn is acknowledged (done) only once its history is
  // durable. If the journal fails, the client gets an error instead; the
  // turn stays in memory (its reply was streamed and its KV kept).
  if (svc.journal != nullptr && state.journal_uid != 0) {
    const JournalRecord record = turn_record(state, all, tokens, tokens_kept, now);
    const Result<void> durable = co_await svc.journal->commit(record);
    if (!durable) {
      reply->done =
          TurnFailed{TurnError{TurnErrorKind::internal,
                               "the turn could not be made durable: " + durable.error().message}};
    }
  }
  (void)send(out, std::move(reply->done));
  state.tokens = std::move(tokens);
  state.rendered = std::move(rendered);
  state.messages = std::move(all);
  state.last_active_unix_s = now;
  ++state.turns;
}

asio::awaitable<void> run_completion(const TurnServices& svc, const ConversationState& state,
                                     TurnId turn, std::string prompt,
                                     model::SamplingParams sampling, TurnEventChannel& out) {
  if (auto problem = model::validate(sampling); !problem.empty()) {
    send_error(out, TurnErrorKind::invalid_request, problem);
    co_return;
  }
  // Raw text: no template, and no control tokens from the client.
  const model::TextPiece piece{prompt, false};
  const auto tokens = svc.tokenizer->encode_pieces(std::span(&piece, 1), svc.tokenizer->adds_bos_by_default());
  if (tokens.empty()) {
    send_error(out, TurnErrorKind::invalid_request, "the prompt is empty");
    co_return;
  }
  auto reply = co_await generate(svc, state, turn, tokens, std::move(sampling), out);
  if (reply) (void)send(out, std::move(reply->done));
}

asio::awaitable<void> ConversationActor::operator()(StartTurn m) {
  if (m.prompt) {
    co_await run_completion(*services_, state_, m.turn, std::move(*m.prompt), std::move(m.sampling),
                            *m.out);
  } else {
    co_await run_turn(*services_, state_, m.turn, std::move(m.messages), std::move(m.sampling),
                      *m.out, m.chat);
  }
}

asio::awaitable<void> ConversationActor::operator()(GetSnapshot m) {
  m.reply.send(ConversationSnapshot{state_.messages, state_.tokens, state_.turns, state_.last_active_unix_s});
  co_return;
}

void ConversationActor::on_rejected(ConversationMsg& m) {
  if (auto* turn = std::get_if<StartTurn>(&m)) {
    send_error(*turn->out, TurnErrorKind::not_found, "the conversation was deleted");
  }
}

}  // namespace pensieve::actors
