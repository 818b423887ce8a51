#include "net/rpc_server.hpp"

#include "net/rpc_connections.hpp"
#include "runtime/thread_name.hpp"

#include <kj/async-io.h>
#include <kj/debug.h>

#include <future>

namespace pensieve::net {

Result<std::unique_ptr<RpcServer>> RpcServer::start(actors::Engine& engine, boost::asio::any_io_executor executor,
                                                    RpcServerOptions options) {
  std::unique_ptr<RpcServer> server(new RpcServer(engine, std::move(executor), std::move(options)));
  // Shared: the loop thread may still be inside set_value() when get() returns.
  auto bound = std::make_shared<std::promise<Result<std::uint16_t>>>();
  auto port = bound->get_future();
  server->thread_ = std::thread([&server = *server, bound] {
    rt::name_this_thread("pv-rpc");
    server.run(*bound);
  });
  auto result = port.get();
  if (!result) {
    server->thread_.join();
    return result.error();
  }
  server->port_ = *result;
  return server;
}

RpcServer::RpcServer(actors::Engine& engine, boost::asio::any_io_executor executor, RpcServerOptions options)
    : engine_(engine), executor_(std::move(executor)), options_(std::move(options)) {}

RpcServer::~RpcServer() { stop(); }

void RpcServer::shutdown(std::chrono::milliseconds grace, std::function<void()> stopped) {
  {
    std::unique_lock lock(mutex_);
    if (!ended_) {
      on_stopped_ = std::move(stopped);
      if (drain_ != nullptr) drain_->refuse_new_turns();
      if (running_ && !stop_posted_) {
        stop_posted_ = true;
        waker_->post([this, grace] {
          if (stop_ == nullptr) return;
          auto timeout = timer_->afterDelay(grace.count() * kj::MILLISECONDS);
          // Once the last turn is delivered, its result() answer may still be
          // on its way out: the connections go once every answer queued is
          // delivered and each client has read to the end (or the linger
          // passed).
          const auto linger = options_.hang_up_linger.count() * kj::MILLISECONDS;
          auto flushed = drain_->drained()
                             .then([this] { return connections_->flushed(*timer_); })
                             .then([this, linger] { return connections_->hang_up(*timer_, linger); });
          draining_ = flushed
                          .exclusiveJoin(kj::mv(timeout))
                          .then([this] {
                            if (stop_ != nullptr) stop_->fulfill();
                          })
                          .eagerlyEvaluate(nullptr);
        });
      }
      return;
    }
  }
  if (stopped) stopped();
}

void RpcServer::stop() {
  {
    std::lock_guard lock(mutex_);
    if (running_ && !stop_posted_) {
      stop_posted_ = true;
      // The loop's own fulfiller, touched on the loop thread only.
      waker_->post([this] {
        if (stop_ != nullptr) stop_->fulfill();
      });
    }
  }
  if (thread_.joinable()) thread_.join();
}

// The loop thread: bind, report the port, serve until stop(). Leaving the
// scope destroys the connections, their capabilities and the turns (each
// cancels its engine turn), then the event loop.
void RpcServer::run(std::promise<Result<std::uint16_t>>& bound) {
  bool reported = false;
  RpcDrain drain;  // outlives the connections, whose turns hold tickets on it
  try {
    RpcServiceOptions service_options{options_.tenant, options_.max_deltas_in_flight,
                                      options_.keys,   false,
                                      &drain,          options_.limits,
                                      options_.turn};
    auto io = kj::setupAsyncIo();
    KJ_DEFER(waker_->detach());  // after `wakes` below is gone, before the loop is
    auto& wait_scope = io.waitScope;
    timer_ = &io.provider->getTimer();
    auto address =
        io.provider->getNetwork().parseAddress(kj::StringPtr(options_.host.c_str()), options_.port).wait(wait_scope);
    auto listener = address->listen();
    const auto port = std::uint16_t(listener->getPort());
    RpcConnections connections(kj::heap<RpcService>(engine_, executor_, service_options, tracker_, waker_));
    connections.listen(kj::mv(listener));
    auto stop = kj::newPromiseAndFulfiller<void>();
    stop_ = stop.fulfiller.get();
    auto wakes = waker_->run(*io.lowLevelProvider).eagerlyEvaluate([](kj::Exception&& e) {
      KJ_LOG(ERROR, "rpc loop waker failed", e);
    });
    {
      std::lock_guard lock(mutex_);
      running_ = true;
      drain_ = &drain;
      connections_ = &connections;
    }
    reported = true;
    bound.set_value(port);
    stop.promise.wait(wait_scope);
    stop_ = nullptr;
    draining_ = nullptr;  // before the event loop goes
    drain.abandon();
  } catch (const kj::Exception& e) {
    stop_ = nullptr;
    draining_ = nullptr;
    drain.abandon();
    const std::string why(e.getDescription().cStr());
    if (!reported) {
      bound.set_value(fail("rpc: cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " + why));
    } else {
      KJ_LOG(ERROR, "rpc server loop failed", e);
    }
  }
  std::function<void()> stopped;
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
    drain_ = nullptr;
    connections_ = nullptr;
    timer_ = nullptr;
    stopped = std::move(on_stopped_);
  }
  if (stopped) stopped();
}

}  // namespace pensieve::net
