#pragma once
// ChatBackend over the engine: maps OpenAI request fields to sampling
// parameters and engine outcomes to OpenAI errors. A request naming a
// conversation ("conversation" field or X-Conversation-Id header) is a turn
// on that stored conversation (created on first use), its messages only the
// new ones; a request without one carries its whole history (stateless).
#include "actors/engine.hpp"
#include "net/chat_backend.hpp"

#include <random>

namespace pensieve::net {

class EngineBackend final : public ChatBackend {
 public:
  explicit EngineBackend(actors::Engine& engine) : engine_(engine) {}

  std::string model_name() const override { return engine_.model_name(); }
  boost::asio::awaitable<ApiResult<GenerationResult>> generate(const ChatRequest& request,
                                                               DeltaSink sink) override;

 private:
  actors::Engine& engine_;
  std::mt19937_64 seeds_{std::random_device{}()};  // for requests that give no seed
};

// The sampling parameters a chat request asks for (seed given by the caller).
model::SamplingParams sampling_params(const ChatRequest& request, std::uint64_t seed);

ApiError api_error(const actors::TurnError& e);

}  // namespace pensieve::net
