#include "bench/pensieve-bench/request_body.hpp"

#include <boost/json.hpp>

namespace pensieve::bench {

namespace json = boost::json;

namespace {

void append(json::array& out, const std::vector<DatasetMessage>* messages) {
  if (!messages) return;
  for (const auto& m : *messages) out.push_back(json::object{{"role", m.role}, {"content", m.content}});
}

}  // namespace

std::string chat_request_body(const RequestSpec& spec) {
  json::array messages;
  if (spec.mode == ClientMode::stateless) append(messages, spec.history);
  append(messages, spec.new_messages);
  json::object body;
  body["model"] = spec.model;
  body["messages"] = std::move(messages);
  body["max_tokens"] = spec.max_tokens;
  body["temperature"] = 0;
  body["ignore_eos"] = true;
  body["stream"] = true;
  body["stream_options"] = json::object{{"include_usage", true}};
  if (spec.mode == ClientMode::stateful) body[conversation_field] = spec.conversation_id;
  return json::serialize(body);
}

}  // namespace pensieve::bench
