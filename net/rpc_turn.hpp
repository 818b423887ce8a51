#pragma once
// RpcTurn: the Turn capability of one RPC turn, on the Cap'n Proto loop's
// thread. It pumps the turn's events from its RpcTurnBridge into the client's
// TokenSink with bounded flow: at most `max_deltas_in_flight` deltas() calls
// unanswered; what the engine generates meanwhile is coalesced into the next
// batch. A sink that throws cancels the turn. Dropping the capability (or the
// connection) cancels the turn too. While its reply is being delivered it
// holds a ticket on the server's RpcDrain, so a stopping server waits for it.
//
// Owns the pump and the sink calls in flight; shares the bridge with the
// engine side. Loop thread only.
#include "net/rpc_drain.hpp"
#include "net/rpc_turn_bridge.hpp"
#include "schemas/pensieve.capnp.h"

#include <kj/async.h>

#include <memory>
#include <optional>
#include <vector>

namespace pensieve::net {

class RpcTurn final : public rpc::schema::Turn::Server, private kj::TaskSet::ErrorHandler {
 public:
  RpcTurn(std::shared_ptr<RpcTurnBridge> bridge, rpc::schema::TokenSink::Client sink, int max_deltas_in_flight,
          bool logprobs, RpcDrain* drain = nullptr);
  ~RpcTurn();

  // Resolves when the engine has accepted the turn; throws its refusal.
  // Call once.
  kj::Promise<void> accepted();

 protected:
  kj::Promise<void> result(ResultContext context) override;
  kj::Promise<void> cancel(CancelContext context) override;

 private:
  void taskFailed(kj::Exception&& exception) override;
  kj::Promise<void> pump();
  void absorb(actors::TurnEvent& event);
  void send_pending();
  void poke();
  kj::Promise<void> finish();

  std::shared_ptr<RpcTurnBridge> bridge_;
  rpc::schema::TokenSink::Client sink_;
  const int max_in_flight_;
  const bool logprobs_;

  std::vector<actors::TurnDelta> pending_;
  int in_flight_ = 0;
  bool accepted_seen_ = false;
  std::optional<actors::TurnDone> summary_;
  std::optional<kj::Exception> failure_;       // the engine's error or the sink's
  kj::Own<kj::PromiseFulfiller<void>> accepted_fulfiller_;
  kj::Promise<void> accepted_promise_{nullptr};
  kj::Own<kj::PromiseFulfiller<void>> poke_;

  RpcDrainTicket ticket_;  // released when the reply is delivered or failed
  kj::TaskSet calls_;
  kj::ForkedPromise<void> finished_;  // last: destroyed first, it runs on this object
};

}  // namespace pensieve::net
