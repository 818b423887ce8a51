#include "net/engine_backend.hpp"

namespace pensieve::net {

namespace asio = boost::asio;

model::SamplingParams sampling_params(const ChatRequest& r, std::uint64_t seed) {
  model::SamplingParams p;
  p.temperature = r.temperature;
  p.top_k = r.top_k;
  p.top_p = r.top_p;
  p.min_p = r.min_p;
  p.repetition_penalty = r.repetition_penalty;
  p.presence_penalty = r.presence_penalty;
  p.frequency_penalty = r.frequency_penalty;
  p.seed = seed;
  p.logprobs = r.logprobs;
  p.top_logprobs = r.top_logprobs;
  p.stop_strings = r.stop;
  p.max_tokens = r.max_tokens;
  p.min_tokens = r.min_tokens;
  p.ignore_eos = r.ignore_eos;
  return p;
}

ApiError api_error(const actors::TurnError& e) {
  switch (e.kind) {
    case actors::TurnErrorKind::invalid_request: return bad_request(e.message);
    case actors::TurnErrorKind::not_found: return ApiError{404, "invalid_request_error", e.message, {}, "not_found"};
    case actors::TurnErrorKind::overloaded:
      return ApiError{503, "server_error", e.message, {}, "overloaded"};
    case actors::TurnErrorKind::internal: break;
  }
  return ApiError{500, "server_error", e.message, {}, {}};
}

asio::awaitable<ApiResult<GenerationResult>> EngineBackend::generate(const ChatRequest& request,
                                                                     DeltaSink sink) {
  std::vector<model::ChatMessage> messages;
  for (const auto& m : request.messages) messages.push_back({m.role, m.content});
  model::SamplingParams sampling = sampling_params(request, request.seed ? *request.seed : seeds_());
  auto to_delta = [this](const actors::TurnDelta& d) {
    GenerationDelta out{d.text, {}};
    for (const auto& t : d.tokens) {
      TokenLogprob lp{engine_.token_text(t.token), t.logprob, {}};
      for (const auto& alt : t.top) lp.top.emplace_back(engine_.token_text(alt.token), alt.logprob);
      out.logprobs.push_back(std::move(lp));
    }
    return out;
  };
  actors::TurnSink engine_sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    const GenerationDelta delta = to_delta(d);  // lives until the sink is done with it
    co_return co_await sink(delta);
  };
  actors::TurnResult result = actors::TurnError{actors::TurnErrorKind::internal, "no turn ran"};
  if (request.conversation_id) {
    const std::string tenant;  // one tenant until API keys name them
    if (!engine_.find_conversation(tenant, *request.conversation_id)) {
      auto created = engine_.create_conversation(tenant, *request.conversation_id);
      if (!created && !engine_.find_conversation(tenant, *request.conversation_id)) {
        co_return api_error(created.error());
      }
    }
    result = co_await engine_.send_turn(tenant, *request.conversation_id, std::move(messages), std::move(sampling),
                                        engine_sink);
  } else {
    actors::TurnRequest turn{std::move(messages), std::move(sampling)};
    result = co_await engine_.run_turn(std::move(turn), engine_sink);
  }
  if (!result) co_return api_error(result.error());
  GenerationResult g;
  g.finish_reason = result->finish == model::FinishReason::length ? "length" : "stop";
  g.prompt_tokens = result->prompt_tokens;
  g.completion_tokens = result->completion_tokens;
  g.cached_tokens = result->cached_tokens;
  co_return g;
}

}  // namespace pensieve::net
