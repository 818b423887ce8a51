#include "net/rpc_server.hpp"

#include <capnp/ez-rpc.h>
#include <kj/debug.h>

#include <future>

namespace pensieve::net {

Result<std::unique_ptr<RpcServer>> RpcServer::start(actors::Engine& engine, boost::asio::any_io_executor executor,
                                                    RpcServerOptions options) {
  std::unique_ptr<RpcServer> server(new RpcServer(engine, std::move(executor), std::move(options)));
  // Shared: the loop thread may still be inside set_value() when get() returns.
  auto bound = std::make_shared<std::promise<Result<std::uint16_t>>>();
  auto port = bound->get_future();
  server->thread_ = std::thread([&server = *server, bound] { server.run(*bound); });
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

void RpcServer::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stop_) {
      stop_->fulfill();
      stop_ = nullptr;
    }
  }
  if (thread_.joinable()) thread_.join();
}

// The loop thread: bind, report the port, serve until stop(). Leaving the
// scope destroys the connections, their capabilities and the turns (each
// cancels its engine turn), then the event loop.
void RpcServer::run(std::promise<Result<std::uint16_t>>& bound) {
  bool reported = false;
  try {
    RpcServiceOptions service_options{options_.tenant, options_.max_deltas_in_flight};
    capnp::EzRpcServer server(kj::heap<RpcService>(engine_, executor_, service_options, tracker_),
                              kj::StringPtr(options_.host.c_str()), options_.port);
    auto& wait_scope = server.getWaitScope();
    const auto port = std::uint16_t(server.getPort().wait(wait_scope));
    auto stop = kj::newPromiseAndCrossThreadFulfiller<void>();
    {
      std::lock_guard lock(mutex_);
      stop_ = kj::mv(stop.fulfiller);
    }
    reported = true;
    bound.set_value(port);
    stop.promise.wait(wait_scope);
  } catch (const kj::Exception& e) {
    const std::string why(e.getDescription().cStr());
    if (!reported) {
      bound.set_value(fail("rpc: cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " + why));
    } else {
      KJ_LOG(ERROR, "rpc server loop failed", e);
    }
  }
}

}  // namespace pensieve::net

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer reads this hook at start-up. kj's cross-thread fulfiller
// (RpcInbox's wake-up) synchronises through atomics inside libkj-async,
// which is not instrumented: TSan sees the fulfilling thread's write of the
// promise state and the loop thread's later free of it, but not the
// release/acquire between them. Our own data crosses under std::mutex.
extern "C" const char* __tsan_default_suppressions() { return "race:kj::_::XThread\n"; }
#endif
