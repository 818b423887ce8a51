#pragma once
// Streaming OpenAI clients for load: each sends `stream: true` chat
// completions back to back (keep-alive while the server allows) until the
// run ends, and checks every reply is a 200 that ends with `data: [DONE]` and
// carries no error event. Runs them all on one io_context in the calling
// thread. Used by bench/fe-latency and the soak test (tests/net).
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::bench {

struct StreamLoad {
  std::uint64_t ok = 0, failed = 0;
  std::string first_error;
};

namespace stream_load_detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;
inline constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

inline asio::awaitable<void> client(std::uint16_t port, int index, Clock::time_point deadline,
                                    int max_tokens, const std::string& model, StreamLoad& stats) {
  auto ex = co_await asio::this_coro::executor;
  const asio::ip::tcp::endpoint server(asio::ip::make_address("127.0.0.1"), port);
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  auto failure = [&](std::string what) {
    ++stats.failed;
    if (stats.first_error.empty()) stats.first_error = std::move(what);
  };
  for (int i = 0; Clock::now() < deadline; ++i) {
    if (!stream) {
      stream.emplace(ex);
      buffer.clear();
      auto [cec] = co_await stream->async_connect(server, tuple_awaitable);
      if (cec) co_return failure("connect: " + cec.message());
      stream->socket().set_option(asio::ip::tcp::no_delay(true));
    }
    http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = R"({"model":)" + boost::json::serialize(boost::json::string(model)) +
                 R"(,"stream":true,"ignore_eos":true,"temperature":0,"max_tokens":)" +
                 std::to_string(max_tokens) + R"(,"messages":[{"role":"user","content":"client )" +
                 std::to_string(index) + " request " + std::to_string(i) + R"("}]})";
    req.keep_alive(true);
    req.prepare_payload();
    auto [wec, written] = co_await http::async_write(*stream, req, tuple_awaitable);
    (void)written;
    if (wec) co_return failure("write: " + wec.message());
    http::response<http::string_body> res;
    auto [rec, read] = co_await http::async_read(*stream, buffer, res, tuple_awaitable);
    (void)read;
    if (rec) co_return failure("read: " + rec.message());
    if (res.result_int() != 200 || !res.body().ends_with("data: [DONE]\n\n") ||
        res.body().find("\"error\"") != std::string::npos) {
      co_return failure(std::to_string(res.result_int()) + " " + res.body().substr(0, 200));
    }
    ++stats.ok;
    if (!res.keep_alive()) {
      beast::error_code ignored;
      stream->socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
      stream.reset();
    }
  }
  if (stream) {
    beast::error_code ignored;
    stream->socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  }
}

}  // namespace stream_load_detail

inline StreamLoad run_stream_clients(std::uint16_t port, int clients, std::chrono::seconds duration,
                                     int max_tokens, const std::string& model) {
  boost::asio::io_context io(1);
  std::vector<StreamLoad> stats(static_cast<std::size_t>(clients));
  const auto deadline = std::chrono::steady_clock::now() + duration;
  for (int i = 0; i < clients; ++i) {
    boost::asio::co_spawn(
        io, stream_load_detail::client(port, i, deadline, max_tokens, model, stats[std::size_t(i)]),
        boost::asio::detached);
  }
  io.run();
  StreamLoad total;
  for (const auto& s : stats) {
    total.ok += s.ok;
    total.failed += s.failed;
    if (total.first_error.empty()) total.first_error = s.first_error;
  }
  return total;
}

}  // namespace pensieve::bench
