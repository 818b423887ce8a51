#pragma once
// RpcService: the Pensieve capability (schemas/pensieve.capnp) over an
// Engine. Every engine call runs on the engine's Asio executor (call_engine,
// RpcTurnBridge); this object lives and answers on the Cap'n Proto loop's
// thread and never blocks it.
//
// Borrows the engine and the executor (both outlive the server); shares the
// turn tracker with the server, which waits on it when stopping.
#include "actors/engine.hpp"
#include "net/rpc_turn_bridge.hpp"
#include "schemas/pensieve.capnp.h"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace pensieve::net {

struct RpcServiceOptions {
  std::string tenant;            // the tenant RPC clients' conversations belong to
  int max_deltas_in_flight = 4;  // unanswered TokenSink.deltas() calls per turn
};

class RpcService final : public rpc::schema::Pensieve::Server {
 public:
  RpcService(actors::Engine& engine, boost::asio::any_io_executor executor, RpcServiceOptions options,
             std::shared_ptr<RpcTurnTracker> tracker);

 protected:
  kj::Promise<void> createConversation(CreateConversationContext context) override;
  kj::Promise<void> getConversation(GetConversationContext context) override;
  kj::Promise<void> deleteConversation(DeleteConversationContext context) override;
  kj::Promise<void> listConversations(ListConversationsContext context) override;
  kj::Promise<void> sendTurn(SendTurnContext context) override;
  kj::Promise<void> stats(StatsContext context) override;

 private:
  actors::Engine& engine_;
  boost::asio::any_io_executor executor_;
  RpcServiceOptions options_;
  std::shared_ptr<RpcTurnTracker> tracker_;
};

}  // namespace pensieve::net
