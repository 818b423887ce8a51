#include "net/rpc_convert.hpp"

#include <cmath>

namespace pensieve::net {

namespace schema = rpc::schema;

Result<model::SamplingParams> sampling_from_rpc(schema::SamplingParams::Reader params) {
  model::SamplingParams s;
  s.temperature = params.getTemperature();
  s.top_k = params.getTopK();
  s.top_p = params.getTopP();
  s.min_p = params.getMinP();
  s.seed = params.getSeed();
  s.max_tokens = params.getMaxTokens();
  s.min_tokens = params.getMinTokens();
  s.ignore_eos = params.getIgnoreEos();
  s.logprobs = params.getLogprobs();
  for (auto stop : params.getStop()) s.stop_strings.emplace_back(stop.cStr(), stop.size());
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f) return fail("temperature must be >= 0");
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return fail("topP must be in (0, 1]");
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) return fail("minP must be in [0, 1]");
  if (s.top_k < 0) return fail("topK must be >= 0");
  if (s.max_tokens < 1) return fail("maxTokens must be >= 1");
  if (s.min_tokens < 0 || s.min_tokens > s.max_tokens) return fail("minTokens must be in [0, maxTokens]");
  for (const auto& stop : s.stop_strings) {
    if (stop.empty()) return fail("stop strings must not be empty");
  }
  return s;
}

kj::Exception rpc_exception(const actors::TurnError& error) {
  auto type = kj::Exception::Type::FAILED;
  const char* kind = "internal";
  switch (error.kind) {
    case actors::TurnErrorKind::invalid_request: kind = "invalid request"; break;
    case actors::TurnErrorKind::not_found: kind = "not found"; break;
    case actors::TurnErrorKind::overloaded:
      kind = "overloaded";
      type = kj::Exception::Type::OVERLOADED;
      break;
    case actors::TurnErrorKind::internal: break;
  }
  return kj::Exception(type, __FILE__, __LINE__, kj::str(kind, ": ", error.message.c_str()));
}

kj::Exception rpc_invalid_request(const std::string& message) {
  return rpc_exception(actors::TurnError{actors::TurnErrorKind::invalid_request, message});
}

void summary_to_rpc(const actors::TurnSummary& summary, schema::TurnSummary::Builder out) {
  switch (summary.finish) {
    case model::FinishReason::none: out.setFinish(schema::FinishReason::NONE); break;
    case model::FinishReason::stop: out.setFinish(schema::FinishReason::STOP); break;
    case model::FinishReason::length: out.setFinish(schema::FinishReason::LENGTH); break;
  }
  out.setPromptTokens(summary.prompt_tokens);
  out.setCompletionTokens(summary.completion_tokens);
  out.setCachedTokens(summary.cached_tokens);
  out.setCancelled(summary.cancelled);
}

void delta_to_rpc(const actors::TurnDelta& delta, bool logprobs, schema::Delta::Builder out) {
  out.setText(kj::StringPtr(delta.text.c_str(), delta.text.size()));
  auto tokens = out.initTokens(unsigned(delta.tokens.size()));
  for (unsigned i = 0; i < tokens.size(); ++i) tokens.set(i, delta.tokens[i].token);
  if (logprobs) {
    auto lps = out.initLogprobs(unsigned(delta.tokens.size()));
    for (unsigned i = 0; i < lps.size(); ++i) lps.set(i, delta.tokens[i].logprob);
  }
}

void stats_to_rpc(const actors::SchedulerStats& stats, schema::Stats::Builder out) {
  out.setIterations(stats.iterations);
  out.setPreemptions(stats.preemptions);
  out.setEvictedConversations(stats.evicted_conversations);
  out.setRefusedOverloaded(stats.refused_overloaded);
  out.setPrefillTokens(stats.prefill_tokens);
  out.setDecodeTokens(stats.decode_tokens);
  out.setReusedTokens(stats.reused_tokens);
  out.setWaiting(stats.waiting);
  out.setRunning(stats.running);
  out.setCachedConversations(stats.cached_conversations);
  out.setFreeBlocks(stats.free_blocks);
  out.setNumBlocks(stats.num_blocks);
}

}  // namespace pensieve::net
