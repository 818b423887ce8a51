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

}  // namespace

RpcService::RpcService(actors::Engine& engine, asio::any_io_executor executor, RpcServiceOptions options,
                       std::shared_ptr<RpcTurnTracker> tracker)
    : engine_(engine), executor_(std::move(executor)), options_(std::move(options)), tracker_(std::move(tracker)) {}

kj::Promise<void> RpcService::createConversation(CreateConversationContext context) {
  std::optional<std::string> id;
  if (context.getParams().getId().size() > 0) id = text(context.getParams().getId());
  auto* engine = &engine_;
  const std::string tenant = options_.tenant;
  std::function op = [engine, tenant, id]() -> asio::awaitable<EngineResult<actors::ConversationInfo>> {
    co_return engine->create_conversation(tenant, id);
  };
  return call_engine<actors::ConversationInfo>(executor_, std::move(op)).then([context](auto&& r) mutable {
    auto info = take_or_throw(std::move(r));
    context.getResults().setId(view(info.id));
  });
}

kj::Promise<void> RpcService::getConversation(GetConversationContext context) {
  auto* engine = &engine_;
  const std::string tenant = options_.tenant;
  const std::string id = text(context.getParams().getId());
  std::function op = [engine, tenant, id]() -> asio::awaitable<EngineResult<actors::ConversationSnapshot>> {
    co_return co_await engine->snapshot(tenant, id);
  };
  return call_engine<actors::ConversationSnapshot>(executor_, std::move(op)).then([context](auto&& r) mutable {
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
  auto* engine = &engine_;
  const std::string tenant = options_.tenant;
  const std::string id = text(context.getParams().getId());
  std::function op = [engine, tenant, id]() -> asio::awaitable<EngineResult<bool>> {
    if (engine->delete_conversation(tenant, id)) co_return true;
    co_return actors::TurnError{actors::TurnErrorKind::not_found, "no conversation '" + id + "'"};
  };
  return call_engine<bool>(executor_, std::move(op)).then([](auto&& r) { take_or_throw(std::move(r)); });
}

kj::Promise<void> RpcService::listConversations(ListConversationsContext context) {
  auto* engine = &engine_;
  const std::string tenant = options_.tenant;
  std::function op = [engine, tenant]() -> asio::awaitable<EngineResult<std::vector<actors::ConversationInfo>>> {
    co_return engine->list_conversations(tenant);
  };
  return call_engine<std::vector<actors::ConversationInfo>>(executor_, std::move(op))
      .then([context](auto&& r) mutable {
        auto infos = take_or_throw(std::move(r));
        auto ids = context.getResults().initIds(unsigned(infos.size()));
        for (unsigned i = 0; i < ids.size(); ++i) ids.set(i, view(infos[i].id));
      });
}

kj::Promise<void> RpcService::sendTurn(SendTurnContext context) {
  auto params = context.getParams();
  auto sampling = sampling_from_rpc(params.getParams());
  if (!sampling) return rpc_invalid_request(sampling.error().message);
  if (params.getContent().size() == 0) return rpc_invalid_request("content must not be empty");
  const bool logprobs = sampling->logprobs;
  auto bridge = std::make_shared<RpcTurnBridge>(engine_, executor_, tracker_);
  auto turn = kj::heap<RpcTurn>(bridge, params.getSink(), options_.max_deltas_in_flight, logprobs);
  auto accepted = turn->accepted();
  rpc::schema::Turn::Client client = kj::mv(turn);
  std::vector<model::ChatMessage> messages{{"user", text(params.getContent())}};
  bridge->start(RpcTurnRequest{options_.tenant, text(params.getConversation()), std::move(messages),
                               std::move(*sampling)});
  return accepted.then([context, client = kj::mv(client)]() mutable { context.getResults().setTurn(kj::mv(client)); });
}

kj::Promise<void> RpcService::stats(StatsContext context) {
  auto* engine = &engine_;
  std::function op = [engine]() -> asio::awaitable<EngineResult<actors::SchedulerStats>> {
    co_return co_await engine->stats();
  };
  const std::string model = engine_.model_name();
  return call_engine<actors::SchedulerStats>(executor_, std::move(op)).then([context, model](auto&& r) mutable {
    auto stats = context.getResults().initStats();
    stats_to_rpc(take_or_throw(std::move(r)), stats);
    stats.setModel(view(model));
  });
}

}  // namespace pensieve::net
