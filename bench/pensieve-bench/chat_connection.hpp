#pragma once
// One keep-alive HTTP/1.1 connection to a target, used by one conversation
// at a time: posts a streamed chat completion and times its events as they
// arrive. Owns its socket; runs on the executor it is given (one thread).
#include "bench/pensieve-bench/sse.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <chrono>
#include <string>

namespace pensieve::bench {

struct ChatExchange {
  int status = 0;  // HTTP status; 0 when no response came
  StreamRecorder stream;
  double e2e_s = 0.0;
  std::string error;  // transport or HTTP error; empty when none
};

class ChatConnection {
 public:
  ChatConnection(boost::asio::any_io_executor executor, boost::asio::ip::tcp::endpoint endpoint,
                 std::string host_header);

  // Times are measured from the moment this is called (connecting, when
  // needed, counts). A connection the server closed while idle is reopened
  // once before the request is given up.
  boost::asio::awaitable<ChatExchange> post_stream(const std::string& path, const std::string& body,
                                                   std::chrono::steady_clock::duration timeout);

 private:
  boost::asio::awaitable<bool> attempt(const std::string& path, const std::string& body,
                                       std::chrono::steady_clock::time_point t0, ChatExchange& out);
  void close();

  boost::beast::tcp_stream stream_;
  boost::asio::ip::tcp::endpoint endpoint_;
  std::string host_header_;
  boost::beast::flat_buffer buffer_;
  bool connected_ = false;
};

}  // namespace pensieve::bench
