#include "net/rpc_connections.hpp"

#include <capnp/rpc-twoparty.h>
#include <kj/debug.h>

namespace pensieve::net {

struct RpcConnections::Connection {
  Connection(kj::Own<kj::AsyncIoStream>&& s, capnp::Capability::Client bootstrap,
             std::set<Connection*>& open)
      : stream(kj::mv(s)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER),
        rpc(capnp::makeRpcServer(network, kj::mv(bootstrap))),
        registry(open) {
    registry.insert(this);
  }
  ~Connection() { registry.erase(this); }

  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
  std::set<Connection*>& registry;
};

RpcConnections::RpcConnections(capnp::Capability::Client bootstrap)
    : bootstrap_(kj::mv(bootstrap)), tasks_(errors_) {}

RpcConnections::~RpcConnections() = default;

void RpcConnections::listen(kj::Own<kj::ConnectionReceiver> listener) {
  listener_ = kj::mv(listener);
  tasks_.add(accept_loop());
}

kj::Promise<void> RpcConnections::accept_loop() {
  return listener_->accept().then([this](kj::Own<kj::AsyncIoStream>&& stream) {
    auto connection = kj::heap<Connection>(kj::mv(stream), bootstrap_, open_);
    // As capnp::TwoPartyServer does: the connection lives until its peer leaves.
    auto disconnected = connection->network.onDisconnect();
    tasks_.add(disconnected.attach(kj::mv(connection)));
    return accept_loop();
  });
}

std::size_t RpcConnections::queued_messages() const {
  std::size_t n = 0;
  for (Connection* c : open_) n += c->network.getCurrentQueueCount();
  return n;
}

kj::Promise<void> RpcConnections::flushed(kj::Timer& timer, kj::Duration poll) {
  // evalLast: after every continuation already runnable (a call's answer is
  // queued a few turns after its promise resolves).
  return kj::evalLast([this, &timer, poll]() -> kj::Promise<void> {
    if (queued_messages() == 0) return kj::READY_NOW;
    return timer.afterDelay(poll).then([this, &timer, poll] { return flushed(timer, poll); });
  });
}

void RpcConnections::ErrorHandler::taskFailed(kj::Exception&& exception) {
  // A connection that fails ends like one that disconnects; the listener
  // failing means no new clients, which the server's stop() reports.
  if (exception.getType() != kj::Exception::Type::DISCONNECTED)
    KJ_LOG(ERROR, "rpc connection failed", exception);
}

}  // namespace pensieve::net
