#include "net/rpc_connections.hpp"

#include "net/rpc_convert.hpp"

#include <capnp/rpc-twoparty.h>
#include <kj/debug.h>
#include <kj/vector.h>

#include <linux/sockios.h>
#include <sys/ioctl.h>

namespace pensieve::net {

struct RpcConnections::Connection {
  Connection(kj::Own<kj::AsyncIoStream>&& s, capnp::Capability::Client bootstrap,
             std::set<Connection*>& open)
      : stream(kj::mv(s)),
        network(*stream, capnp::rpc::twoparty::Side::SERVER, rpc_reader_options()),
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

std::size_t RpcConnections::unacknowledged_bytes() const {
  std::size_t n = 0;
  for (Connection* c : open_) {
    KJ_IF_MAYBE (fd, c->stream->getFd()) {
      int bytes = 0;
      // SIOCOUTQ: bytes in the send queue, sent or not, that the peer has
      // not acknowledged. A socket that cannot say counts as empty.
      if (::ioctl(*fd, SIOCOUTQ, &bytes) == 0 && bytes > 0) n += std::size_t(bytes);
    }
  }
  return n;
}

kj::Promise<void> RpcConnections::flushed(kj::Timer& timer, kj::Duration poll) {
  // evalLast: after every continuation already runnable (a call's answer is
  // queued a few turns after its promise resolves).
  return kj::evalLast([this, &timer, poll]() -> kj::Promise<void> {
    if (queued_messages() == 0 && unacknowledged_bytes() == 0) return kj::READY_NOW;
    return timer.afterDelay(poll).then([this, &timer, poll] { return flushed(timer, poll); });
  });
}

kj::Promise<void> RpcConnections::hang_up(kj::Timer& timer, kj::Duration linger) {
  kj::Vector<kj::Promise<void>> closed;
  for (Connection* c : open_) {
    // Still reading: the peer's last messages are taken in, not refused with
    // a reset, until it closes (each connection then goes by itself).
    closed.add(c->network.onDisconnect());
    // A peer that is gone already has nothing left to read: no error.
    (void)kj::runCatchingExceptions([c] { c->stream->shutdownWrite(); });
  }
  return kj::joinPromises(closed.releaseAsArray()).exclusiveJoin(timer.afterDelay(linger));
}

void RpcConnections::ErrorHandler::taskFailed(kj::Exception&& exception) {
  // A connection that fails ends like one that disconnects; the listener
  // failing means no new clients, which the server's stop() reports.
  if (exception.getType() != kj::Exception::Type::DISCONNECTED)
    KJ_LOG(ERROR, "rpc connection failed", exception);
}

}  // namespace pensieve::net
