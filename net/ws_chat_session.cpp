#include "net/ws_chat_session.hpp"

#include "net/api_error.hpp"
#include "net/turn_call.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <chrono>
#include <memory>

namespace pensieve::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
using Clock = std::chrono::steady_clock;

namespace {

// A one-shot signal between coroutines of one executor.
class Event {
 public:
  explicit Event(const asio::any_io_executor& ex) : timer_(ex) { reset(); }
  void set() {
    set_ = true;
    timer_.cancel();
  }
  void reset() {
    set_ = false;
    timer_.expires_at(asio::steady_timer::time_point::max());
  }
  asio::awaitable<void> wait() {
    if (!set_) co_await timer_.async_wait(tuple_awaitable);
  }

 private:
  asio::steady_timer timer_;
  bool set_ = false;
};

// What the writer sends: a text message, the closing handshake, or nothing
// more (the writer ends).
struct Outgoing {
  enum class Kind : std::uint8_t { text, close_going_away, close_try_later, end } kind = Kind::end;
  std::string text;
};
using Outbox = asio::experimental::channel<void(boost::system::error_code, Outgoing)>;

// One connection's chat. Owns the WebSocket over the server's TCP stream
// (which outlives it), the outbox and the running turn. Its coroutines (the
// reader in run(), the writer, the turn's pump) share it by shared_ptr and
// all run on the connection's executor.
class Session {
 public:
  Session(actors::Engine& engine, const WsChatOptions& options, std::string tenant, beast::tcp_stream& stream)
      : engine_(engine),
        options_(options),
        tenant_(std::move(tenant)),
        ws_(stream),
        outbox_(stream.get_executor(), 64),
        writer_done_(stream.get_executor()),
        turn_done_(stream.get_executor()) {
    turn_done_.set();
  }

  static asio::awaitable<void> run(std::shared_ptr<Session> self, HttpRequest request, UpgradeContext& context);

 private:
  static asio::awaitable<void> write_loop(std::shared_ptr<Session> self);
  static asio::awaitable<void> pump_turn(std::shared_ptr<Session> self, Clock::time_point start);
  static asio::awaitable<void> go_away(std::shared_ptr<Session> self);

  // Named locals, never a braced temporary, under co_await: GCC 12.
  asio::awaitable<void> post(std::string message) {
    Outgoing out{Outgoing::Kind::text, std::move(message)};
    co_await push(std::move(out));
  }
  asio::awaitable<void> push(Outgoing out) {
    co_await outbox_.async_send(boost::system::error_code{}, std::move(out), tuple_awaitable);
  }
  // The closing handshake, once only (kind: close_going_away or close_try_later).
  asio::awaitable<void> post_close(Outgoing::Kind kind) {
    if (close_posted_) co_return;
    close_posted_ = true;
    Outgoing close{kind, {}};
    co_await push(std::move(close));
  }
  // The server stops: close with 1001 once no turn runs.
  asio::awaitable<void> close_going_away() { co_await post_close(Outgoing::Kind::close_going_away); }
  // Refuses new work while the server stops; true if it did.
  asio::awaitable<bool> refuse_going_away() {
    if (!going_away_) co_return false;
    co_await post_error("going_away", "the server is shutting down; no new turns");
    co_return true;
  }
  asio::awaitable<void> post_error(std::string code, std::string message) {
    std::string text = ws_error_json(WsError{std::move(code), std::move(message)});
    co_await post(std::move(text));
  }

  asio::awaitable<void> handle(std::string_view text, const std::shared_ptr<Session>& self);
  asio::awaitable<void> open(const WsOpen& m);
  asio::awaitable<void> send(WsSend m, const std::shared_ptr<Session>& self);
  asio::awaitable<void> remove(const WsDelete& m);

  actors::Engine& engine_;
  const WsChatOptions& options_;
  const std::string tenant_;
  websocket::stream<beast::tcp_stream&> ws_;
  Outbox outbox_;
  Event writer_done_;
  Event turn_done_;                       // set while no turn runs
  std::optional<TurnCall> turn_;
  std::optional<std::string> conversation_;  // the open one
  bool write_failed_ = false;
  bool closed_ = false;        // the writer sent the close frame
  bool going_away_ = false;    // the server stops: no new turns
  bool close_posted_ = false;  // close_going_away() was posted
};

asio::awaitable<void> Session::run(std::shared_ptr<Session> self, HttpRequest request, UpgradeContext& context) {
  auto& ws = self->ws_;
  ws.set_option(websocket::stream_base::timeout{std::chrono::seconds(30), std::chrono::seconds(60), true});
  ws.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "pensieve"); }));
  ws.read_message_max(self->options_.max_message_bytes);
  auto [accept_ec] = co_await ws.async_accept(request, tuple_awaitable);
  if (accept_ec) co_return;
  auto ex = ws.get_executor();
  asio::co_spawn(ex, write_loop(self), asio::detached);
  // Runs on the server's executor, while this coroutine holds `self`.
  // New work is refused from this call on (a message read after it is).
  context.on_going_away = [ex, self] {
    self->going_away_ = true;
    asio::co_spawn(ex, go_away(self), asio::detached);
  };
  if (context.going_away) context.on_going_away();

  std::optional<websocket::close_code> close_with;
  for (;;) {
    beast::flat_buffer buffer;
    // Ends when the client closes (Beast answers its close frame), when it
    // is gone, when a message is too big (Beast closes with 1009), or when
    // the server stops (it closes the socket).
    auto [ec, n] = co_await ws.async_read(buffer, tuple_awaitable);
    if (ec) break;
    if (!ws.got_text()) {
      close_with = websocket::close_code::unknown_data;  // 1003: the protocol is text
      break;
    }
    const std::string text = beast::buffers_to_string(buffer.data());
    co_await self->handle(text, self);
  }
  // Wind down: the turn first (it still writes), then the writer.
  context.on_going_away = nullptr;  // drops its reference to the session
  if (self->turn_) self->turn_->cancel();
  co_await self->turn_done_.wait();
  Outgoing end{Outgoing::Kind::end, {}};
  co_await self->push(std::move(end));
  co_await self->writer_done_.wait();
  if (close_with && !self->write_failed_ && !self->closed_) {
    co_await ws.async_close(websocket::close_reason(*close_with), tuple_awaitable);
  }
}

asio::awaitable<void> Session::write_loop(std::shared_ptr<Session> self) {
  for (;;) {
    auto [ec, out] = co_await self->outbox_.async_receive(tuple_awaitable);
    if (ec || out.kind == Outgoing::Kind::end) break;
    // The client is gone, or closing: drain, so no sender waits.
    if (self->write_failed_ || self->closed_) continue;
    if (out.kind == Outgoing::Kind::close_going_away || out.kind == Outgoing::Kind::close_try_later) {
      // The client answers with its close frame, which ends the reader.
      self->closed_ = true;
      const auto reason = out.kind == Outgoing::Kind::close_going_away
                              ? websocket::close_reason(websocket::close_code::going_away, "server shutting down")
                              : websocket::close_reason(websocket::close_code::try_again_later, "rate limited");
      auto [cec] = co_await self->ws_.async_close(reason, tuple_awaitable);
      if (cec) self->write_failed_ = true;
      continue;
    }
    self->ws_.text(true);
    auto [wec, n] = co_await self->ws_.async_write(asio::buffer(out.text), tuple_awaitable);
    if (wec) self->write_failed_ = true;
  }
  self->writer_done_.set();
}

asio::awaitable<void> Session::pump_turn(std::shared_ptr<Session> self, Clock::time_point start) {
  WsTurnTiming timing;
  // Every delta queued behind the one awaited goes out in the same message.
  TurnWrite write = [&](std::span<actors::TurnDelta> deltas) -> asio::awaitable<bool> {
    if (!timing.ttft_s) timing.ttft_s = std::chrono::duration<double>(Clock::now() - start).count();
    std::string text;
    for (const auto& d : deltas) text += d.text;
    std::string message = ws_delta_json(text);
    co_await self->post(std::move(message));
    co_return true;
  };
  const actors::TurnResult result =
      co_await self->turn_->drain(std::move(write), self->options_.turn);
  timing.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::string end = result ? ws_done_json(*result, timing)
                           : ws_error_json(WsError{ws_error_code(result.error().kind), result.error().message});
  // Posted before the turn is forgotten: a go_away() meanwhile sees the
  // turn and leaves the close to this coroutine, after the end.
  co_await self->post(std::move(end));
  self->turn_.reset();
  self->turn_done_.set();
  if (self->going_away_) co_await self->close_going_away();
}

// The server stops: no new turns; the one running (if any) finishes, then
// the session closes with 1001 (pump_turn does it after the turn's end).
asio::awaitable<void> Session::go_away(std::shared_ptr<Session> self) {
  if (!self->turn_) co_await self->close_going_away();
}

asio::awaitable<void> Session::handle(std::string_view text, const std::shared_ptr<Session>& self) {
  auto parsed = parse_ws_message(text);
  if (!parsed) {
    std::string error = ws_error_json(parsed.error());
    co_await post(std::move(error));
    co_return;
  }
  if (auto* m = std::get_if<WsOpen>(&*parsed)) {
    co_await open(*m);
  } else if (auto* s = std::get_if<WsSend>(&*parsed)) {
    co_await send(std::move(*s), self);
  } else if (std::holds_alternative<WsCancel>(*parsed)) {
    if (turn_) turn_->cancel();  // no turn: it has just ended, nothing to do
  } else if (std::holds_alternative<WsList>(*parsed)) {
    std::string list = ws_conversations_json(engine_.list_conversations(tenant_));
    co_await post(std::move(list));
  } else if (auto* d = std::get_if<WsDelete>(&*parsed)) {
    co_await remove(*d);
  }
}

asio::awaitable<void> Session::open(const WsOpen& m) {
  const bool refused = co_await refuse_going_away();
  if (refused) co_return;
  if (turn_) {
    co_await post_error("busy", "a turn is running; cancel it or wait for 'done'");
    co_return;
  }
  if (!m.conversation) {
    auto created = engine_.create_conversation(tenant_);
    if (!created) {
      co_await post_error(ws_error_code(created.error().kind), created.error().message);
      co_return;
    }
    conversation_ = created->id;
    const std::vector<model::ChatMessage> no_history;
    std::string opened = ws_opened_json(created->id, engine_.model_name(), no_history);
    co_await post(std::move(opened));
    co_return;
  }
  auto snapshot = co_await engine_.snapshot(tenant_, *m.conversation);
  if (!snapshot) {
    co_await post_error(ws_error_code(snapshot.error().kind), snapshot.error().message);
    co_return;
  }
  conversation_ = *m.conversation;
  std::string opened = ws_opened_json(*m.conversation, engine_.model_name(), snapshot->messages);
  co_await post(std::move(opened));
}

asio::awaitable<void> Session::send(WsSend m, const std::shared_ptr<Session>& self) {
  const bool refused = co_await refuse_going_away();
  if (refused) co_return;
  if (!conversation_) {
    co_await post_error("not_open", "send 'open' before 'send'");
    co_return;
  }
  if (turn_) {
    co_await post_error("busy", "a turn is running; cancel it or wait for 'done'");
    co_return;
  }
  actors::TurnRequest request{.tenant = tenant_,
                              .conversation = *conversation_,
                              .create_conversation = false,  // 'open' created it
                              .messages = {{std::move(m.role), std::move(m.content)}}};
  request.sampling.max_tokens = m.max_tokens.value_or(options_.default_max_tokens);
  request.sampling.temperature = m.temperature.value_or(request.sampling.temperature);
  request.sampling.top_p = m.top_p.value_or(request.sampling.top_p);
  request.sampling.ignore_eos = m.ignore_eos;
  const auto start = Clock::now();
  auto stream = TurnCall::start(engine_, ws_.get_executor(), std::move(request), options_.limits);
  if (!stream) {
    co_await post_error(ws_error_code(stream.error().kind), stream.error().message);
    // Over the tenant's turn limit: the error, then close 1013 (try again
    // later), so a client's loop backs off instead of spinning on errors.
    if (stream.error().kind == actors::TurnErrorKind::rate_limited) {
      co_await post_close(Outgoing::Kind::close_try_later);
    }
    co_return;
  }
  turn_.emplace(std::move(*stream));
  turn_done_.reset();
  asio::co_spawn(ws_.get_executor(), pump_turn(self, start), asio::detached);
}

asio::awaitable<void> Session::remove(const WsDelete& m) {
  if (!engine_.delete_conversation(tenant_, m.conversation)) {
    std::string message = "no conversation '" + m.conversation + "'";
    co_await post_error("not_found", std::move(message));
    co_return;
  }
  if (conversation_ == m.conversation) conversation_.reset();
  std::string deleted = ws_deleted_json(m.conversation);
  co_await post(std::move(deleted));
}

asio::awaitable<void> refuse(beast::tcp_stream& stream, const HttpRequest& request) {
  http::response<http::string_body> res{http::status::unauthorized, request.version()};
  res.set(http::field::server, "pensieve");
  res.set(http::field::content_type, "application/json");
  res.body() = ApiError{401, "invalid_request_error", "missing or invalid API key", {}, "invalid_api_key"}.to_json();
  res.prepare_payload();
  stream.expires_after(std::chrono::seconds(30));
  co_await http::async_write(stream, res, tuple_awaitable);
}

// What a browser can see: it cannot read a refused upgrade's status (its
// WebSocket just closes with 1006), but it reads a close frame's code and reason.
asio::awaitable<void> refuse_with_close(beast::tcp_stream& stream, HttpRequest request) {
  websocket::stream<beast::tcp_stream&> ws(stream);
  ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  auto [accept_ec] = co_await ws.async_accept(request, tuple_awaitable);
  if (accept_ec) co_return;
  auto [close_ec] =
      co_await ws.async_close(websocket::close_reason(websocket::close_code::policy_error, "invalid_api_key"),
                              tuple_awaitable);
  (void)close_ec;
}

}  // namespace

UpgradeHandler make_ws_chat_handler(actors::Engine& engine, WsChatOptions options) {
  auto shared = std::make_shared<const WsChatOptions>(std::move(options));
  return [&engine, shared](beast::tcp_stream& stream, HttpRequest request,
                           UpgradeContext& context) -> asio::awaitable<void> {
    std::optional<std::string> tenant = shared->tenant_of ? shared->tenant_of(request) : std::string{};
    if (!tenant) {
      if (shared->refuse_with_close) {
        co_await refuse_with_close(stream, std::move(request));
      } else {
        co_await refuse(stream, request);
      }
      co_return;
    }
    auto session = std::make_shared<Session>(engine, *shared, std::move(*tenant), stream);
    co_await Session::run(session, std::move(request), context);
  };
}

}  // namespace pensieve::net
