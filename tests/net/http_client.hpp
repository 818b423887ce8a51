#pragma once
// A blocking HTTP/1.1 client for loopback tests.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdint>
#include <string>

namespace pensieve::testing {

struct HttpReply {
  int status = 0;
  std::string body;
  std::string content_type;
  bool chunked = false;
  std::string retry_after;  // the Retry-After header, empty when absent
};

inline HttpReply http_call(std::uint16_t port, boost::beast::http::verb method,
                           const std::string& target, const std::string& body = {},
                           const std::string& auth = {}) {
  namespace http = boost::beast::http;
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!auth.empty()) req.set(http::field::authorization, auth);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(socket, buffer, parser);
  auto res = parser.release();
  return {int(res.result_int()), res.body(), std::string(res[http::field::content_type]),
          res.chunked(), std::string(res[http::field::retry_after])};
}

}  // namespace pensieve::testing
