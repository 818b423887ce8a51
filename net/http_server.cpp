#include "net/http_server.hpp"

#include "net/api_error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <cerrno>
#include <chrono>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/socket.h>

namespace pensieve::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

struct HttpServer::State {
  State(asio::any_io_executor ex, HttpHandler h, HttpServerOptions o)
      : executor(ex), acceptor(ex), handler(std::move(h)), options(o), drained(ex) {
    drained.expires_at(asio::steady_timer::time_point::max());
  }
  asio::any_io_executor executor;
  tcp::acceptor acceptor;
  HttpHandler handler;
  HttpServerOptions options;
  std::set<beast::tcp_stream*> connections;  // touched only on `executor`
  std::map<beast::tcp_stream*, UpgradeContext*> upgraded;  // the WebSocket ones among them
  std::set<beast::tcp_stream*> busy;         // those whose request is being answered
  asio::steady_timer drained;                // cancelled when the last connection ends
  bool stopping = false;
};

namespace {

// Writes to one connection; remembers whether a response went out and
// whether the connection can be kept open afterwards.
class ConnectionWriter final : public ResponseWriter {
 public:
  ConnectionWriter(beast::tcp_stream& stream, unsigned version, bool keep_alive)
      : stream_(stream), version_(version), keep_alive_(keep_alive) {}
  ~ConnectionWriter() override { stop_watching(); }

  // Waits for the socket to turn readable: with nothing to read (a peek
  // answers 0 or an error) the client has closed its end. Bytes to read are
  // a pipelined request: left in place, and the watch ends. The watch state
  // is shared with the handler, which may run after this writer is gone.
  void watch_for_disconnect() override {
    if (watch_) return;
    watch_ = std::make_shared<Watch>();
    start_wait(stream_.socket(), watch_);
  }
  bool disconnected() const override { return watch_ && watch_->gone; }

  bool responded() const { return responded_; }
  bool reusable() const { return keep_alive_ && !failed_ && !streaming_; }

  void add_header(std::string name, std::string value) override {
    headers_.emplace_back(std::move(name), std::move(value));
  }

  asio::awaitable<bool> send(int status, std::string_view content_type, std::string body) override {
    http::response<http::string_body> res{http::status(status), version_};
    res.set(http::field::server, "pensieve");
    res.set(http::field::content_type, content_type);
    for (auto& [name, value] : std::exchange(headers_, {})) res.set(name, value);
    res.keep_alive(keep_alive_);
    res.body() = std::move(body);
    res.prepare_payload();
    stop_watching();
    responded_ = true;
    stream_.expires_after(std::chrono::seconds(30));
    auto [ec, n] = co_await http::async_write(stream_, res, tuple_awaitable);
    failed_ = failed_ || bool(ec);
    co_return !ec;
  }

  asio::awaitable<bool> start_stream(int status, std::string_view content_type) override {
    http::response<http::empty_body> res{http::status(status), version_};
    res.set(http::field::server, "pensieve");
    res.set(http::field::content_type, content_type);
    res.set(http::field::cache_control, "no-cache");
    for (auto& [name, value] : std::exchange(headers_, {})) res.set(name, value);
    res.keep_alive(false);
    res.chunked(true);
    stop_watching();
    responded_ = true;
    streaming_ = true;
    http::response_serializer<http::empty_body> sr{res};
    stream_.expires_after(std::chrono::seconds(30));
    auto [ec, n] = co_await http::async_write_header(stream_, sr, tuple_awaitable);
    failed_ = failed_ || bool(ec);
    co_return !ec;
  }

  asio::awaitable<bool> write_chunk(std::string_view data) override {
    if (failed_) co_return false;
    const auto chunk = http::make_chunk(asio::const_buffer(data.data(), data.size()));
    // Usually the socket's buffer takes the chunk whole: then the bytes are
    // out when send returns, without a trip through the I/O thread's queue
    // (which, with many streams on the thread, waits behind theirs).
    const std::size_t sent = write_now(chunk);
    if (failed_) co_return false;
    if (sent == beast::buffer_bytes(chunk)) co_return true;
    beast::buffers_suffix<std::decay_t<decltype(chunk)>> rest(chunk);
    rest.consume(sent);
    stream_.expires_after(std::chrono::seconds(30));
    auto [ec, n] = co_await asio::async_write(stream_, rest, tuple_awaitable);
    failed_ = failed_ || bool(ec);
    co_return !ec;
  }

  asio::awaitable<bool> end_stream() override {
    if (failed_) co_return false;
    auto [ec, n] = co_await asio::async_write(stream_, http::make_chunk_last(), tuple_awaitable);
    failed_ = failed_ || bool(ec);
    co_return !ec;
  }

 private:
  // One non-blocking send of what the socket takes now: bytes written, 0
  // when it would block; an error marks the writer failed.
  template <class Buffers>
  std::size_t write_now(const Buffers& buffers) {
    beast::error_code ec;
    if (!non_blocking_) {
      stream_.socket().non_blocking(true, ec);
      if (ec) return 0;  // the async path then does the whole write
      non_blocking_ = true;
    }
    const std::size_t n = stream_.socket().write_some(buffers, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return 0;
    if (ec) failed_ = true;
    return n;
  }

  struct Watch {
    bool gone = false;
    bool active = true;
  };

  static void start_wait(tcp::socket& socket, std::shared_ptr<Watch> watch) {
    socket.async_wait(tcp::socket::wait_read, [&socket, watch](boost::system::error_code ec) {
      if (!watch->active) return;  // the writer, and so the socket, may be gone
      if (ec == asio::error::operation_aborted && socket.is_open()) return;
      if (ec) {
        watch->gone = true;  // closed under us (the server stops)
        return;
      }
      char byte = 0;
      const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return;  // a pipelined request: not a disconnect
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        start_wait(socket, watch);  // spurious readiness
        return;
      }
      watch->gone = true;
    });
  }

  void stop_watching() {
    if (!watch_ || !watch_->active) return;
    watch_->active = false;
    if (!watch_->gone) {
      boost::system::error_code ignored;
      stream_.socket().cancel(ignored);  // only the wait is pending now
    }
  }

  beast::tcp_stream& stream_;
  std::shared_ptr<Watch> watch_;
  unsigned version_;
  bool keep_alive_;
  bool responded_ = false;
  bool streaming_ = false;
  std::vector<std::pair<std::string, std::string>> headers_;  // for the next response
  bool failed_ = false;
  bool non_blocking_ = false;  // the socket, once the first chunk is written at once
};

asio::awaitable<void> answer_error(beast::tcp_stream& stream, ApiError e, unsigned version) {
  ConnectionWriter w(stream, version, false);
  const std::string body = e.to_json();
  co_await w.send(e.status, "application/json", body);
}

ApiError read_error(const boost::system::error_code& ec) {
  if (ec == http::error::body_limit) {
    return ApiError{413, "invalid_request_error", "request body too large", {}, "body_too_large"};
  }
  if (ec == http::error::header_limit) {
    return ApiError{431, "invalid_request_error", "request headers too large", {}, {}};
  }
  return ApiError{400, "invalid_request_error", "malformed HTTP request: " + ec.message(), {}, {}};
}

bool is_disconnect(const boost::system::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == beast::error::timeout;
}

const UpgradeHandler* find_upgrade(const HttpServerOptions& options, const HttpRequest& req) {
  if (!beast::websocket::is_upgrade(req)) return nullptr;
  std::string_view target = req.target();
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  for (const auto& route : options.websocket_routes) {
    if (route.path == target) return &route.handler;
  }
  return nullptr;
}

// Reads one request in three deadlines: its first byte within the idle
// timeout (a keep-alive connection may wait that long between requests), the
// rest of its header within the header timeout after that (a client sending
// a header a byte at a time, slowloris, is cut off there), its body within
// the idle timeout again. A header timeout is a beast timeout: the
// connection closes without an answer.
asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> read_request(
    beast::tcp_stream& stream, beast::flat_buffer& buffer, http::request_parser<http::string_body>& parser,
    const HttpServerOptions& options) {
  const auto idle = std::chrono::seconds(options.idle_timeout_s);
  if (buffer.size() == 0) {  // else a pipelined request has begun already
    stream.expires_after(idle);
    auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), tuple_awaitable);
    if (ec) co_return std::tuple{ec, std::size_t{0}};
    buffer.commit(n);
  }
  stream.expires_after(std::chrono::milliseconds(options.header_timeout_ms));
  auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, tuple_awaitable);
  if (ec || parser.is_done()) co_return std::tuple{ec, n};
  stream.expires_after(idle);
  co_return co_await http::async_read(stream, buffer, parser, tuple_awaitable);
}

asio::awaitable<void> serve_connection(std::shared_ptr<HttpServer::State> st, tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  st->connections.insert(&stream);
  beast::flat_buffer buffer;
  while (!st->stopping) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(st->options.max_header_bytes);
    parser.body_limit(st->options.max_body_bytes);
    auto [ec, n] = co_await read_request(stream, buffer, parser, st->options);
    if (ec) {
      if (!is_disconnect(ec)) co_await answer_error(stream, read_error(ec), 11);
      break;
    }
    HttpRequest req = parser.release();
    if (const UpgradeHandler* upgrade = find_upgrade(st->options, req)) {
      stream.expires_never();  // the WebSocket keeps its own timeouts
      UpgradeContext context;
      st->upgraded.emplace(&stream, &context);
      co_await (*upgrade)(stream, std::move(req), context);
      st->upgraded.erase(&stream);
      break;
    }
    ConnectionWriter writer(stream, req.version(), req.keep_alive());
    st->busy.insert(&stream);
    co_await st->handler(req, writer);
    st->busy.erase(&stream);
    if (!writer.responded()) {
      const std::string body = ApiError{500, "server_error", "no response", {}, {}}.to_json();
      co_await writer.send(500, "application/json", body);
    }
    if (!writer.reusable()) break;
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream.close();
  st->connections.erase(&stream);
  if (st->connections.empty()) st->drained.cancel();
}

asio::awaitable<void> accept_loop(std::shared_ptr<HttpServer::State> st) {
  while (!st->stopping) {
    auto [ec, socket] = co_await st->acceptor.async_accept(tuple_awaitable);
    if (ec) {
      if (ec == asio::error::operation_aborted || !st->acceptor.is_open()) break;
      continue;  // e.g. EMFILE: keep serving the connections we have
    }
    // A streamed token is one small write: Nagle would hold it back until
    // the client acknowledges the previous one (up to its delayed-ACK timer).
    boost::system::error_code nodelay_ec;
    socket.set_option(tcp::no_delay(true), nodelay_ec);
    asio::co_spawn(st->executor, serve_connection(st, std::move(socket)), asio::detached);
  }
}

}  // namespace

HttpServer::HttpServer(asio::any_io_executor executor, HttpHandler handler, HttpServerOptions options)
    : state_(std::make_shared<State>(executor, std::move(handler), options)) {}

HttpServer::~HttpServer() = default;

Result<void> HttpServer::listen(const std::string& host, std::uint16_t port) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return fail("bad listen address '" + host + "': " + ec.message());
  tcp::endpoint endpoint(address, port);
  auto& acceptor = state_->acceptor;
  if (acceptor.open(endpoint.protocol(), ec); ec) return fail("socket: " + ec.message());
  acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (state_->options.reuse_port) {
    using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
    if (acceptor.set_option(reuse_port(true), ec); ec) return fail("SO_REUSEPORT: " + ec.message());
  }
  if (acceptor.bind(endpoint, ec); ec) {
    return fail("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  }
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) {
    return fail("listen: " + ec.message());
  }
  asio::co_spawn(state_->executor, accept_loop(state_), asio::detached);
  return {};
}

std::uint16_t HttpServer::port() const {
  boost::system::error_code ec;
  auto ep = state_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

std::size_t HttpServer::open_connections() const { return state_->connections.size(); }

asio::awaitable<void> HttpServer::stop(std::chrono::milliseconds grace) {
  auto st = state_;
  st->stopping = true;
  boost::system::error_code ec;
  st->acceptor.close(ec);
  // Idle keep-alive connections end now; requests being answered get the
  // grace period to finish (stopping makes their connection end after it);
  // upgraded connections are told to go away and get as long.
  auto close = [&](bool only_idle) {
    for (beast::tcp_stream* s : st->connections) {
      if (only_idle && st->busy.contains(s)) continue;
      auto upgraded = st->upgraded.find(s);
      if (only_idle && upgraded != st->upgraded.end()) {
        UpgradeContext& context = *upgraded->second;
        if (!context.going_away) {
          context.going_away = true;
          if (context.on_going_away) context.on_going_away();
        }
        continue;
      }
      // A WebSocket session may be between operations: closing its socket
      // makes its next one fail too, where a cancel would be missed. So
      // does a request past its grace: its reply fails and its turn ends.
      if (upgraded != st->upgraded.end() || st->busy.contains(s)) {
        s->socket().close(ec);
      } else {
        s->socket().cancel(ec);
      }
    }
  };
  close(grace.count() > 0);
  if (grace.count() > 0 && !st->connections.empty()) {
    st->drained.expires_after(grace);
    co_await st->drained.async_wait(tuple_awaitable);
    close(false);
  }
  st->drained.expires_at(asio::steady_timer::time_point::max());
  if (!st->connections.empty()) co_await st->drained.async_wait(tuple_awaitable);
}

}  // namespace pensieve::net
