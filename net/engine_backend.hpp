#pragma once
// ChatBackend over the engine, through the front ends' one adapter
// (net/turn_call.hpp): an OpenAI request becomes a TurnRequest, the turn's
// deltas become GenerationDeltas, its errors OpenAI errors. A request naming a
// conversation ("conversation" field or X-Conversation-Id header) is a turn
// on that stored conversation of the request's tenant (created on first
// use), its messages only the new ones; a request without one carries its
// whole history (stateless: an anonymous conversation). TurnCall records the
// metrics and cancels a turn that outlives the request timeout.
#include "actors/engine.hpp"
#include "net/chat_backend.hpp"
#include "net/metrics.hpp"
#include "net/turn_call.hpp"

#include <chrono>
#include <mutex>
#include <random>

namespace pensieve::net {

struct EngineBackendOptions {
  std::chrono::milliseconds request_timeout{std::chrono::minutes(10)};
  ServerMetrics* metrics = nullptr;  // optional; must outlive the backend
  RequestLimits limits;              // the bounds every turn is checked against
};

class EngineBackend final : public ChatBackend {
 public:
  explicit EngineBackend(actors::Engine& engine, EngineBackendOptions options = {})
      : engine_(engine), options_(options) {}

  std::string model_name() const override { return engine_.model_name(); }
  boost::asio::awaitable<ApiResult<GenerationResult>> generate(const ChatRequest& request,
                                                               DeltaSink sink) override;
  boost::asio::awaitable<ApiResult<ConversationView>> create_conversation(const std::string& tenant,
                                                                          std::optional<std::string> id) override;
  boost::asio::awaitable<ApiResult<ConversationView>> get_conversation(const std::string& tenant,
                                                                       const std::string& id) override;
  std::vector<ConversationView> list_conversations(const std::string& tenant) override;
  bool delete_conversation(const std::string& tenant, const std::string& id) override;
  boost::asio::awaitable<EngineGauges> gauges() override;

 private:
  std::uint64_t next_seed();
  GenerationDelta generation_delta(actors::TurnDelta& delta) const;  // takes its text

  actors::Engine& engine_;
  EngineBackendOptions options_;
  std::mutex seeds_mutex_;
  std::mt19937_64 seeds_{std::random_device{}()};  // for requests that give no seed
};

}  // namespace pensieve::net
