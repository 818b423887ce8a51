#pragma once
// RpcService: the Pensieve capability (schemas/pensieve.capnp) over an
// Engine. Every engine call runs on the engine's Asio executor (call_engine,
// RpcTurnBridge); this object lives and answers on the Cap'n Proto loop's
// thread and never blocks it.
//
// Borrows the engine and the executor (both outlive the server); shares the
// turn tracker with the server, which waits on it when stopping.
#include "actors/engine.hpp"
#include "net/api_keys.hpp"
#include "net/chat_request.hpp"
#include "net/rpc_drain.hpp"
#include "net/rpc_loop_waker.hpp"
#include "net/rpc_turn_bridge.hpp"
#include "schemas/pensieve.capnp.h"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace pensieve::net {

struct RpcServiceOptions {
  std::string tenant;            // the tenant RPC clients' conversations belong to
  int max_deltas_in_flight = 4;  // unanswered TokenSink.deltas() calls per turn
  // With keys required, a service not yet logged in answers login() only;
  // login(key) returns one bound to the key's tenant.
  std::shared_ptr<const ApiKeys> keys;
  bool logged_in = false;
  // Counts the turns being delivered; once draining, sendTurn refuses. Null: none.
  RpcDrain* drain = nullptr;
  RequestLimits limits;  // the bounds every turn is checked against (net/turn_call.hpp)
  TurnCallOptions turn;  // each turn's timeout and the metrics it records into
};

class RpcService final : public rpc::schema::Pensieve::Server {
 public:
  RpcService(actors::Engine& engine, boost::asio::any_io_executor executor, RpcServiceOptions options,
             std::shared_ptr<RpcTurnTracker> tracker, std::shared_ptr<RpcLoopWaker> waker);

 protected:
  kj::Promise<void> createConversation(CreateConversationContext context) override;
  kj::Promise<void> getConversation(GetConversationContext context) override;
  kj::Promise<void> deleteConversation(DeleteConversationContext context) override;
  kj::Promise<void> listConversations(ListConversationsContext context) override;
  kj::Promise<void> sendTurn(SendTurnContext context) override;
  kj::Promise<void> stats(StatsContext context) override;
  kj::Promise<void> login(LoginContext context) override;

 private:
  // Whether calls other than login() must be refused (keys, no login yet).
  bool locked() const { return options_.keys && options_.keys->required() && !options_.logged_in; }

  actors::Engine& engine_;
  boost::asio::any_io_executor executor_;
  RpcServiceOptions options_;
  std::shared_ptr<RpcTurnTracker> tracker_;
  std::shared_ptr<RpcLoopWaker> waker_;  // answers from the executor reach the loop through it
};

}  // namespace pensieve::net
