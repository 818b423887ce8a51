#pragma once
// RpcConnections: the RPC server's listener and its connections, each a
// Cap'n Proto two-party RPC system serving one bootstrap capability (what
// capnp::EzRpcServer does), kept so that a stopping server can tell when
// every answer it has given is delivered: flushed() resolves once no
// connection has an outgoing message waiting in memory (TwoPartyVatNetwork
// counts them until the write completes) nor a byte its peer has not
// acknowledged. hang_up() then closes them without losing what a client has
// yet to read: closing a socket whose peer still sends (a client answering
// the last answers with Finish messages) resets the connection, and the
// client drops what it had not read.
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
  // Bytes written to the sockets that their peers have not acknowledged.
  std::size_t unacknowledged_bytes() const;

  // Resolves once every message queued so far (and any queued meanwhile)
  // has been written and acknowledged by its peer: checked each time the
  // loop runs out of other work, and again every `poll` of the timer while
  // a socket holds bytes.
  kj::Promise<void> flushed(kj::Timer& timer, kj::Duration poll = 1 * kj::MILLISECONDS);

  // After flushed(): ends every connection's sending side and resolves once
  // each peer has closed its own (it read everything, up to the end), or
  // after `linger` (a peer that is not reading now may never close).
  kj::Promise<void> hang_up(kj::Timer& timer, kj::Duration linger);

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
