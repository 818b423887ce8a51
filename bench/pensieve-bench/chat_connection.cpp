#include "bench/pensieve-bench/chat_connection.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include <limits>

namespace pensieve::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

ChatConnection::ChatConnection(asio::any_io_executor executor, asio::ip::tcp::endpoint endpoint,
                               std::string host_header)
    : stream_(std::move(executor)), endpoint_(endpoint), host_header_(std::move(host_header)) {}

void ChatConnection::close() {
  beast::error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
  buffer_.clear();
  connected_ = false;
}

asio::awaitable<ChatExchange> ChatConnection::post_stream(const std::string& path, const std::string& body,
                                                         Clock::duration timeout) {
  const Clock::time_point t0 = Clock::now();
  ChatExchange out;
  stream_.expires_after(timeout);
  const bool reused = connected_;
  const bool answered = co_await attempt(path, body, t0, out);
  if (!answered && reused) {
    // The server may have closed the idle keep-alive connection: retry once
    // on a fresh one, from the same t0.
    out = ChatExchange{};
    co_await attempt(path, body, t0, out);
  }
  out.e2e_s = seconds_since(t0);
  co_return out;
}

// Returns false when nothing of a response arrived (the request may be retried).
asio::awaitable<bool> ChatConnection::attempt(const std::string& path, const std::string& body,
                                              Clock::time_point t0, ChatExchange& out) {
  if (!connected_) {
    auto [ec] = co_await stream_.async_connect(endpoint_, use_tuple);
    if (ec) {
      out.error = "connect: " + ec.message();
      close();
      co_return true;  // a fresh connection failed: no retry
    }
    connected_ = true;
  }
  http::request<http::string_body> req{http::verb::post, path, 11};
  req.set(http::field::host, host_header_);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.keep_alive(true);
  req.body() = body;
  req.prepare_payload();
  auto [wec, written] = co_await http::async_write(stream_, req, use_tuple);
  (void)written;
  if (wec) {
    out.error = "write: " + wec.message();
    close();
    co_return false;
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  SseParser sse;
  std::size_t consumed = 0;
  bool any_bytes = false;
  while (!parser.is_done()) {
    auto [ec, n] = co_await http::async_read_some(stream_, buffer_, parser, use_tuple);
    const double t = seconds_since(t0);
    any_bytes = any_bytes || n > 0 || parser.is_header_done();
    if (ec) {
      out.error = "read: " + ec.message();
      close();
      co_return any_bytes;
    }
    if (!parser.is_header_done() || parser.get().result_int() != 200) continue;
    const std::string& received = parser.get().body();
    for (const std::string& event : sse.feed(std::string_view(received).substr(consumed))) {
      out.stream.on_event(event, t);
    }
    consumed = received.size();
  }
  out.status = int(parser.get().result_int());
  if (out.status != 200) {
    out.error = "HTTP " + std::to_string(out.status) + ": " + parser.get().body().substr(0, 300);
  } else if (!out.stream.error().empty()) {
    out.error = out.stream.error();
  } else if (!out.stream.done()) {
    out.error = "the stream ended without data: [DONE]";
  }
  if (!parser.get().keep_alive()) close();
  co_return true;
}

}  // namespace pensieve::bench
