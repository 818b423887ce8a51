#include "net/http_server_group.hpp"

#include "runtime/thread_name.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <string>

namespace pensieve::net {

namespace asio = boost::asio;

HttpServerGroup::HttpServerGroup(int threads) {
  for (int i = 0; i < (threads < 1 ? 1 : threads); ++i) {
    contexts_.push_back(std::make_unique<asio::io_context>(1));
    work_.push_back(asio::make_work_guard(*contexts_.back()));
  }
  for (std::size_t i = 0; i < contexts_.size(); ++i)
    threads_.emplace_back([&io = *contexts_[i], i] {
      rt::name_this_thread("pv-http-" + std::to_string(i));
      io.run();
    });
}

HttpServerGroup::~HttpServerGroup() {
  join();
  servers_.clear();  // before their contexts
}

Result<void> HttpServerGroup::listen(const std::string& host, std::uint16_t port, const HttpHandler& handler,
                                     HttpServerOptions options) {
  options.reuse_port = contexts_.size() > 1;
  for (auto& io : contexts_) {
    servers_.push_back(std::make_unique<HttpServer>(io->get_executor(), handler, options));
    if (auto r = servers_.back()->listen(host, port); !r) return r.error();
    port = servers_.back()->port();  // the rest join the first one's port
  }
  port_ = port;
  return {};
}

asio::awaitable<void> HttpServerGroup::stop(std::chrono::milliseconds grace) {
  // All on the awaiting executor: the count and the timer that wakes it.
  struct Pending {
    explicit Pending(const asio::any_io_executor& ex) : done(ex, asio::steady_timer::time_point::max()) {}
    std::size_t left = 0;
    asio::steady_timer done;
  };
  const auto home = co_await asio::this_coro::executor;
  auto pending = std::make_shared<Pending>(home);
  pending->left = servers_.size();
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    asio::co_spawn(*contexts_[i], servers_[i]->stop(grace), [home, pending](std::exception_ptr) {
      asio::post(home, [pending] {
        if (--pending->left == 0) pending->done.cancel();
      });
    });
  }
  if (pending->left > 0) co_await pending->done.async_wait(asio::as_tuple(asio::use_awaitable));
}

void HttpServerGroup::join() {
  work_.clear();
  for (auto& io : contexts_) io->stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace pensieve::net
