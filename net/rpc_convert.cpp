#include "net/rpc_convert.hpp"

namespace pensieve::net {

namespace schema = rpc::schema;

model::SamplingParams sampling_from_rpc(schema::SamplingParams::Reader params) {
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
  return s;
}

actors::EngineResult<actors::TurnRequest> turn_from_rpc(schema::Pensieve::SendTurnParams::Reader params,
                                                        const std::string& tenant, const RequestLimits& limits) {
  auto invalid = [](std::string param, std::string message) {
    return actors::TurnError{actors::TurnErrorKind::invalid_request, std::move(message), std::move(param)};
  };
  const auto content = params.getContent();
  if (content.size() == 0) return invalid("content", "content must not be empty");
  if (content.size() > rpc_max_content_bytes) {
    return invalid("content", "content is over " + std::to_string(rpc_max_content_bytes) + " bytes");
  }
  const auto sampling = params.getParams();
  if (sampling.getStop().size() > limits.max_stop_strings) {
    return invalid("stop", "'stop' allows at most " + std::to_string(limits.max_stop_strings) + " strings");
  }
  actors::TurnRequest request{.tenant = tenant,
                              .conversation = std::string(params.getConversation().cStr(),
                                                          params.getConversation().size()),
                              .create_conversation = false,  // createConversation made it
                              .messages = {{"user", std::string(content.cStr(), content.size())}},
                              .sampling = sampling_from_rpc(sampling)};
  if (auto problem = validate_turn(request, limits)) return *problem;
  return request;
}

capnp::ReaderOptions rpc_reader_options() {
  capnp::ReaderOptions options;
  // Words: a maximal content, the stop strings and the call's framing, twice over.
  options.traversalLimitInWords = 2 * (rpc_max_content_bytes / sizeof(capnp::word)) + 64 * 1024;
  options.nestingLimit = 32;  // the schema nests four deep; the RPC envelope a few more
  return options;
}

kj::Exception rpc_exception(const actors::TurnError& error) {
  const ErrorProtocol& p = error_protocol(error.kind);
  const auto type =
      p.rpc_overloaded ? kj::Exception::Type::OVERLOADED : kj::Exception::Type::FAILED;
  const std::string prefix(p.rpc_prefix);
  return kj::Exception(type, __FILE__, __LINE__,
                       kj::str(prefix.c_str(), ": ", error.message.c_str()));
}

kj::Exception rpc_invalid_request(const std::string& message) {
  return rpc_exception(actors::TurnError{actors::TurnErrorKind::invalid_request, message});
}

void summary_to_rpc(const actors::TurnDone& summary, schema::TurnSummary::Builder out) {
  switch (summary.finish) {
    case model::FinishReason::none: out.setFinish(schema::FinishReason::NONE); break;
    case model::FinishReason::stop: out.setFinish(schema::FinishReason::STOP); break;
    case model::FinishReason::length: out.setFinish(schema::FinishReason::LENGTH); break;
  }
  out.setPromptTokens(summary.prompt_tokens);
  out.setCompletionTokens(summary.completion_tokens);
  out.setCachedTokens(summary.cached_tokens);
  out.setCancelled(summary.cancelled);
  out.setTruncatedTokens(summary.truncated_tokens);
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
