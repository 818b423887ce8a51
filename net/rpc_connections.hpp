#pragma once
// RpcConnections: the RPC server's listener and its connections, each a
// Cap'n Proto two-party RPC system serving one bootstrap capability (what
// capnp::EzRpcServer does), kept so that a stopping server can tell when
// every answer it has given is written: flushed() resolves once no
// connection has an outgoing message waiting in memory, i.e. each one has
// been handed to its socket (TwoPartyVatNetwork counts them until the write
// completes).
//
// Owns the connections (each dropped when its peer disconnects, or with
// this object); the Cap'n Proto loop's thread only.
#include <capnp/capability.h>
#include <kj/async-io.h>
#include <kj/async.h>

#include <cstddef>
#include <set>

namespace pensieve::net {

class RpcConnections {
 public:
  explicit RpcConnections(capnp::Capability::Client bootstrap);
  ~RpcConnections();
  RpcConnections(const RpcConnections&) = delete;
  RpcConnections& operator=(const RpcConnections&) = delete;

  // Accepts connections on `listener` until this object goes.
  void listen(kj::Own<kj::ConnectionReceiver> listener);

  // Messages not yet written to their sockets, over all connections.
  std::size_t queued_messages() const;

  // Resolves once every message queued so far (and any queued meanwhile)
  // has been written: checked each time the loop runs out of other work,
  // and again every `poll` of the timer while a socket is full.
  kj::Promise<void> flushed(kj::Timer& timer, kj::Duration poll = 1 * kj::MILLISECONDS);

  std::size_t open_connections() const { return open_.size(); }

 private:
  struct Connection;
  class ErrorHandler : public kj::TaskSet::ErrorHandler {
    void taskFailed(kj::Exception&& exception) override;
  };

  kj::Promise<void> accept_loop();

  capnp::Capability::Client bootstrap_;
  kj::Own<kj::ConnectionReceiver> listener_;
  std::set<Connection*> open_;  // each removes itself when it goes
  ErrorHandler errors_;
  kj::TaskSet tasks_;  // last: the accept loop and the connections go first
};

}  // namespace pensieve::net
