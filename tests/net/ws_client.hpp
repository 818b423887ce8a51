#pragma once
// A WebSocket client for loopback tests: blocking calls over Beast's async
// operations, each bounded by a deadline so a broken server fails the test
// instead of hanging it.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace pensieve::testing {

class WsClient {
 public:
  // `authorization`: the upgrade request's Authorization header, when not empty.
  explicit WsClient(std::uint16_t port, const std::string& target = "/v1/ws", const std::string& authorization = {}) {
    namespace asio = boost::asio;
    boost::beast::get_lowest_layer(ws_).connect({asio::ip::make_address("127.0.0.1"), port});
    if (!authorization.empty()) {
      ws_.set_option(boost::beast::websocket::stream_base::decorator([authorization](auto& req) {
        req.set(boost::beast::http::field::authorization, authorization);
      }));
    }
    boost::system::error_code ec;
    ws_.async_handshake("127.0.0.1", target, [&](boost::system::error_code e) { ec = e; });
    REQUIRE(run());
    REQUIRE_FALSE(ec);
  }

  void send_text(const std::string& text) { write(text, true); }
  void send_binary(const std::string& data) { write(data, false); }
  void send(const boost::json::object& message) { send_text(boost::json::serialize(message)); }

  // The next message; nullopt (and close_code() set) when the server closed.
  std::optional<boost::json::object> receive() {
    boost::beast::flat_buffer buffer;
    boost::system::error_code ec;
    ws_.async_read(buffer, [&](boost::system::error_code e, std::size_t) { ec = e; });
    REQUIRE(run());
    if (ec) {
      closed_ = true;
      return std::nullopt;
    }
    auto v = boost::json::parse(boost::beast::buffers_to_string(buffer.data()));
    REQUIRE(v.is_object());
    return v.as_object();
  }

  // The next message, which must be there.
  boost::json::object next() {
    auto m = receive();
    REQUIRE(m.has_value());
    return std::move(*m);
  }

  // Reads a whole reply: the concatenated deltas and the closing message.
  struct Reply {
    std::string text;
    int deltas = 0;
    boost::json::object end;  // "done" or "error"
  };
  Reply reply() {
    Reply r;
    for (;;) {
      auto m = next();
      if (m.at("type") == "delta") {
        r.text += std::string(m.at("text").as_string());
        ++r.deltas;
        continue;
      }
      r.end = std::move(m);
      return r;
    }
  }

  bool closed() const { return closed_; }
  std::uint16_t close_code() const { return ws_.reason().code; }

  // Drops the TCP connection without a closing handshake.
  void drop() {
    boost::system::error_code ec;
    boost::beast::get_lowest_layer(ws_).close(ec);
  }

 private:
  void write(const std::string& data, bool text) {
    boost::system::error_code ec;
    ws_.text(text);
    ws_.async_write(boost::asio::buffer(data), [&](boost::system::error_code e, std::size_t) { ec = e; });
    REQUIRE(run());
    REQUIRE_FALSE(ec);
  }

  // Runs the pending operation; false when it did not finish in time.
  bool run() {
    io_.restart();
    io_.run_for(std::chrono::seconds(60));
    return io_.stopped();
  }

  boost::asio::io_context io_;
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket> ws_{io_};
  bool closed_ = false;
};

}  // namespace pensieve::testing
