#pragma once
// TurnCall: the one adapter between the front ends (HTTP/SSE, WebSocket,
// Cap'n Proto RPC) and the engine. Each front end decodes its wire format
// into an actors::TurnRequest and encodes what comes back; everything in
// between is here, once:
//
//   validate_turn()   the request's bounds (OpenAI's: temperature [0, 2],
//                     top_p (0, 1], max_tokens >= 1, known roles, ...)
//   TurnCall::start() validation, the tenant's turn limit, then Engine::start
//   TurnCall::drain() the one loop: coalesces the deltas queued behind the
//                     one awaited into one write, enforces the request's
//                     timeout (the turn is cancelled; the result is a
//                     timeout error), records TTFT, inter-token and
//                     front-end latency and token counts in the metrics
//   error_protocol()  the error kind -> protocol table: HTTP status and
//                     OpenAI error type/code, WebSocket error code, RPC
//                     exception type
//
// Threads: a TurnCall is used on the executor it was started on; cancel()
// from any thread.
#include "actors/engine.hpp"
#include "net/api_error.hpp"
#include "net/chat_request.hpp"
#include "net/metrics.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

namespace pensieve::net {

// The first bound `request` breaks, as an invalid_request error naming the
// field (the OpenAI name), or nullopt. `limits`: the server's own caps.
std::optional<actors::TurnError> validate_turn(const actors::TurnRequest& request,
                                               const RequestLimits& limits);

// An OpenAI request (HTTP) as a turn; `seed` for requests that give none.
actors::TurnRequest turn_request(const ChatRequest& request, std::uint64_t seed);

// How each protocol reports an error kind.
struct ErrorProtocol {
  int http_status;
  std::string_view openai_type;  // the OpenAI error body's "type"
  std::string_view openai_code;  // its "code" (empty: null)
  std::string_view ws_code;      // the WebSocket error frame's "code"
  bool rpc_overloaded;           // the RPC exception's type: OVERLOADED, else FAILED
  std::string_view rpc_prefix;   // the RPC exception's description starts "<prefix>: "
};
const ErrorProtocol& error_protocol(actors::TurnErrorKind kind);

// The HTTP status and OpenAI error body of a turn error.
ApiError api_error(const actors::TurnError& e);

struct TurnCallOptions {
  std::chrono::milliseconds timeout = std::chrono::milliseconds::max();  // max: none
  ServerMetrics* metrics = nullptr;  // optional; outlives the call
};

// Called with the deltas ready to go out, in order (several when the engine
// got ahead of the writer: they go out in one write; the callee may move
// from them). Returning false: the client has left; the turn is cancelled.
using TurnWrite = std::function<boost::asio::awaitable<bool>(std::span<actors::TurnDelta>)>;

class TurnCall {
 public:
  static actors::EngineResult<TurnCall> start(actors::Engine& engine,
                                              const boost::asio::any_io_executor& executor,
                                              actors::TurnRequest request,
                                              const RequestLimits& limits);

  // Drains the turn to its end through `write`; its end (a timeout is an
  // error of kind timeout). Once only.
  boost::asio::awaitable<actors::TurnResult> drain(TurnWrite write, TurnCallOptions options);

  void cancel() const { stream_->cancel(); }

 private:
  TurnCall(actors::TurnStream stream, std::shared_ptr<const void> permit)
      : stream_(std::make_shared<actors::TurnStream>(std::move(stream))), permit_(std::move(permit)) {}
  std::shared_ptr<actors::TurnStream> stream_;  // shared with the timeout's timer
  std::shared_ptr<const void> permit_;          // the tenant's turn slot, while the call lives
};

}  // namespace pensieve::net
