#include "net/rpc_service.hpp"

#include "net/rpc_convert.hpp"
#include "net/rpc_engine_call.hpp"
#include "net/rpc_turn.hpp"

namespace pensieve::net {

namespace asio = boost::asio;
using actors::EngineResult;

namespace {

std::string text(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

kj::StringPtr view(const std::string& s) { return kj::StringPtr(s.c_str(), s.size()); }

template <class T>
T take_or_throw(EngineResult<T>&& r) {
  if (!r) kj::throwFatalException(rpc_exception(r.error()));
  return std::move(*r);
}

kj::Exception unauthenticated(const char* why) {
  return kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__, kj::str("unauthenticated: ", why));
}

kj::Promise<void> refuse_locked() { return unauthenticated("call login(key) first: this server needs an API key"); }

}  // namespace

RpcService::RpcService(actors::Engine& engine, asio::any_io_executor executor, RpcServiceOptions options,
                       std::shared_ptr<RpcTurnTracker> tracker, std::shared_ptr<RpcLoopWaker> waker)
    : engine_(engine),
      executor_(std::move(executor)),
      options_(std::move(options)),
      tracker_(std::move(tracker)),
      waker_(std::move(waker)) {}

kj::Promise<void> RpcService::createConversation(CreateConversationContext context) {
  if (locked()) return refuse_locked();
  std::optional<std::string> id;
  if (context.getParams().getId().size() > 0) id = text(context.getParams().getId());
  auto* engine = &engine_;
  const std::string tenant = options_.tenant;
  std::function op = [engine, tenant, id]() -> asio::awaitable<EngineResult<actors::ConversationInfo>> {
    co_return engine->create_conversation(tenant, id);
  };
  return call_engine<actors::ConversationInfo>(executor_, waker_, std::move(op)).then([context](auto&& r) mutable {
    auto info = take_or_throw(std::move(r));
    context.getResults().setId(view(info.id));
  });
}

kj::Promise<void> RpcService::getConversation(GetConversationContext context) {
  if (locked()) return refuse_locked();
  auto* engine = &engine_;
  const std::string tenant = options_.tenant;
  const std::string id = text(context.getParams().getId());
  std::function op = [engine, tenant, id]() -> asio::awaitable<EngineResult<actors::ConversationSnapshot>> {
    co_return co_await engine->snapshot(tenant, id);
  };
  return call_engine<actors::ConversationSnapshot>(executor_, waker_, std::move(op)).then([context](auto&& r) mutable {
    auto snapshot = take_or_throw(std::move(r));
    auto results = context.getResults();
    auto history = results.initHistory(unsigned(snapshot.messages.size()));
    for (unsigned i = 0; i < history.size(); ++i) {
      history[i].setRole(view(snapshot.messages[i].role));
      history[i].setContent(view(snapshot.messages[i].content));
    }
    results.setTokens(std::int32_t(snapshot.tokens.size()));
    results.setTurns(snapshot.turns);
  });
}

kj::Promise<void> RpcService::deleteConversation(DeleteConversationContext context) {
  if (locked()) return refuse_locked();
  auto* engine = &engine_;
  const std::string tenant = options_.tenant;
  const std::string id = text(context.getParams().getId());
  std::function op = [engine, tenant, id]() -> asio::awaitable<EngineResult<bool>> {
    if (engine->delete_conversation(tenant, id)) co_return true;
    co_return actors::TurnError{actors::TurnErrorKind::not_found, "no conversation '" + id + "'"};
  };
  return call_engine<bool>(executor_, waker_, std::move(op)).then([](auto&& r) { take_or_throw(std::move(r)); });
}

kj::Promise<void> RpcService::listConversations(ListConversationsContext context) {
  if (locked()) return refuse_locked();
  auto* engine = &engine_;
  const std::string tenant = options_.tenant;
  std::function op = [engine, tenant]() -> asio::awaitable<EngineResult<std::vector<actors::ConversationInfo>>> {
    co_return engine->list_conversations(tenant);
  };
  return call_engine<std::vector<actors::ConversationInfo>>(executor_, waker_, std::move(op))
      .then([context](auto&& r) mutable {
        auto infos = take_or_throw(std::move(r));
        auto ids = context.getResults().initIds(unsigned(infos.size()));
        for (unsigned i = 0; i < ids.size(); ++i) ids.set(i, view(infos[i].id));
      });
}

kj::Promise<void> RpcService::sendTurn(SendTurnContext context) {
  if (locked()) return refuse_locked();
  if (options_.drain && options_.drain->refusing()) {
    return kj::Exception(kj::Exception::Type::DISCONNECTED, __FILE__, __LINE__,
                         kj::str("unavailable: the server is shutting down"));
  }
  auto params = context.getParams();
  auto converted = turn_from_rpc(params, options_.tenant, options_.limits);
  if (!converted) return rpc_exception(converted.error());
  actors::TurnRequest request = std::move(*converted);
  const bool logprobs = request.sampling.logprobs;
  auto bridge = std::make_shared<RpcTurnBridge>(engine_, executor_, tracker_, waker_);
  auto turn = kj::heap<RpcTurn>(bridge, params.getSink(), options_.max_deltas_in_flight, logprobs, options_.drain);
  auto accepted = turn->accepted();
  rpc::schema::Turn::Client client = kj::mv(turn);
  bridge->start(std::move(request), options_.limits, options_.turn);
  return accepted.then([context, client = kj::mv(client)]() mutable { context.getResults().setTurn(kj::mv(client)); });
}

kj::Promise<void> RpcService::stats(StatsContext context) {
  if (locked()) return refuse_locked();
  auto* engine = &engine_;
  std::function op = [engine]() -> asio::awaitable<EngineResult<actors::SchedulerStats>> {
    co_return co_await engine->stats();
  };
  const std::string model = engine_.model_name();
  return call_engine<actors::SchedulerStats>(executor_, waker_, std::move(op)).then([context, model](auto&& r) mutable {
    auto stats = context.getResults().initStats();
    stats_to_rpc(take_or_throw(std::move(r)), stats);
    stats.setModel(view(model));
  });
}

kj::Promise<void> RpcService::login(LoginContext context) {
  RpcServiceOptions bound = options_;
  if (options_.keys && options_.keys->required()) {
    const auto key = context.getParams().getKey();
    auto tenant = options_.keys->tenant_for("Bearer " + std::string(key.cStr(), key.size()));
    if (!tenant) return unauthenticated("invalid API key");
    bound.tenant = std::move(*tenant);
  }
  bound.logged_in = true;
  context.getResults().setService(kj::heap<RpcService>(engine_, executor_, std::move(bound), tracker_, waker_));
  return kj::READY_NOW;
}

}  // namespace pensieve::net
