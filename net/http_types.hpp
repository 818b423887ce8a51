#pragma once
// What an HTTP handler sees: the parsed request, and a writer for either one
// whole response or a chunked stream (Server-Sent Events).
#include <boost/asio/awaitable.hpp>
#include <boost/beast/http.hpp>

#include <functional>
#include <string>
#include <string_view>

namespace pensieve::net {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // One complete response. Returns false when the client is gone.
  virtual boost::asio::awaitable<bool> send(int status, std::string_view content_type,
                                            std::string body) = 0;
  // A chunked response: headers now, then chunks as they come.
  virtual boost::asio::awaitable<bool> start_stream(int status, std::string_view content_type) = 0;
  // A header for the next send() or start_stream() (e.g. Retry-After).
  virtual void add_header(std::string name, std::string value) = 0;
  virtual boost::asio::awaitable<bool> write_chunk(std::string_view data) = 0;
  virtual boost::asio::awaitable<bool> end_stream() = 0;

  // For a handler that computes a while before answering at all (a whole,
  // not streamed, completion): starts watching the connection, so that a
  // client that closes it meanwhile is noticed before the final write.
  // disconnected() turns true once it has; the watch ends at the first
  // send() or start_stream(). Writers without a connection never disconnect.
  virtual void watch_for_disconnect() {}
  virtual bool disconnected() const { return false; }
};

using HttpHandler = std::function<boost::asio::awaitable<void>(const HttpRequest&, ResponseWriter&)>;

}  // namespace pensieve::net
