#pragma once
// ChatBackend over the engine: maps OpenAI request fields to sampling
// parameters and engine outcomes to OpenAI errors.
#include "actors/serial_engine.hpp"
#include "net/chat_backend.hpp"

#include <random>

namespace pensieve::net {

class EngineBackend final : public ChatBackend {
 public:
  explicit EngineBackend(actors::SerialEngine& engine) : engine_(engine) {}

  std::string model_name() const override { return engine_.model_name(); }
  boost::asio::awaitable<ApiResult<GenerationResult>> generate(const ChatRequest& request,
                                                               DeltaSink sink) override;

 private:
  actors::SerialEngine& engine_;
  std::mt19937_64 seeds_{std::random_device{}()};  // for requests that give no seed
};

// The sampling parameters a chat request asks for (seed given by the caller).
model::SamplingParams sampling_params(const ChatRequest& request, std::uint64_t seed);

ApiError api_error(const actors::TurnError& e);

}  // namespace pensieve::net
