#include "net/openai_json.hpp"

#include "gpu/text/utf8_stream.hpp"

#include <boost/json.hpp>

namespace pensieve::net {

namespace json = boost::json;

json::object usage_json(const GenerationResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", json::object{{"cached_tokens", r.cached_tokens}}}};
}

namespace {

// Pensieve's own fields, beside OpenAI's: what the conversation dropped to
// fit the context (only when it dropped something, so responses stay
// OpenAI's otherwise).
void add_pensieve_fields(json::object& o, const GenerationResult& r) {
  if (r.truncated_tokens > 0) o["pensieve"] = json::object{{"truncated_tokens", r.truncated_tokens}};
}

// A token may be part of a UTF-8 character; JSON strings must be valid
// UTF-8, so the text shows U+FFFD there and `bytes` keeps the real bytes.
std::string token_text(const std::string& bytes) {
  model::Utf8Stream utf8;
  std::string text = utf8.feed(bytes);
  return text + utf8.flush();
}

json::array token_bytes(const std::string& s) {
  json::array bytes;
  for (unsigned char c : s) bytes.push_back(int(c));
  return bytes;
}

}  // namespace

json::object logprobs_json(const std::vector<TokenLogprob>& lps) {
  json::array content;
  for (const auto& lp : lps) {
    json::array top;
    for (const auto& [tok, l] : lp.top) {
      top.push_back(json::object{{"token", token_text(tok)}, {"logprob", l}, {"bytes", token_bytes(tok)}});
    }
    content.push_back(json::object{{"token", token_text(lp.token)},
                                   {"logprob", lp.logprob},
                                   {"bytes", token_bytes(lp.token)},
                                   {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

namespace {

const char* object_name(ApiShape shape, bool chunk) {
  if (shape == ApiShape::text) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

// Legacy completions' logprobs: tokens, token_logprobs, top_logprobs.
json::object text_logprobs_json(const std::vector<TokenLogprob>& lps) {
  json::array tokens, token_logprobs, top;
  for (const auto& lp : lps) {
    tokens.push_back(json::value(token_text(lp.token)));
    token_logprobs.push_back(lp.logprob);
    json::object alts;
    for (const auto& [tok, l] : lp.top) alts[token_text(tok)] = l;
    top.push_back(std::move(alts));
  }
  return {{"tokens", std::move(tokens)}, {"token_logprobs", std::move(token_logprobs)}, {"top_logprobs", std::move(top)}};
}

}  // namespace

std::string completion_json(const CompletionIds& ids, const std::string& text,
                            const std::vector<TokenLogprob>& lps, bool with_logprobs,
                            const GenerationResult& result) {
  if (ids.shape == ApiShape::text) {
    json::object choice{{"index", 0}, {"text", text}, {"finish_reason", result.finish_reason}};
    choice["logprobs"] = with_logprobs ? json::value(text_logprobs_json(lps)) : json::value(nullptr);
    json::object o{{"id", ids.id},         {"object", "text_completion"},
                   {"created", ids.created_s}, {"model", ids.model},
                   {"choices", json::array{std::move(choice)}}, {"usage", usage_json(result)}};
    add_pensieve_fields(o, result);
    return json::serialize(o);
  }
  json::object choice{{"index", 0},
                      {"message", json::object{{"role", "assistant"}, {"content", text}}},
                      {"finish_reason", result.finish_reason}};
  choice["logprobs"] = with_logprobs ? json::value(logprobs_json(lps)) : json::value(nullptr);
  json::object o{{"id", ids.id},         {"object", "chat.completion"},
                 {"created", ids.created_s}, {"model", ids.model},
                 {"choices", json::array{std::move(choice)}}, {"usage", usage_json(result)}};
  add_pensieve_fields(o, result);
  return json::serialize(o);
}

std::string chunk_event(const CompletionIds& ids, const json::object& delta,
                        const GenerationDelta* with_logprobs, const char* finish_reason) {
  json::object choice{{"index", 0}};
  if (ids.shape == ApiShape::text) {
    const json::value* content = delta.if_contains("content");
    choice["text"] = content ? *content : json::value("");
    choice["logprobs"] =
        with_logprobs ? json::value(text_logprobs_json(with_logprobs->logprobs)) : json::value(nullptr);
  } else {
    choice["delta"] = delta;
    choice["logprobs"] =
        with_logprobs ? json::value(logprobs_json(with_logprobs->logprobs)) : json::value(nullptr);
  }
  choice["finish_reason"] = finish_reason ? json::value(finish_reason) : json::value(nullptr);
  json::object o{{"id", ids.id},         {"object", object_name(ids.shape, true)},
                 {"created", ids.created_s}, {"model", ids.model},
                 {"choices", json::array{std::move(choice)}}};
  return "data: " + json::serialize(o) + "\n\n";
}

std::string usage_event(const CompletionIds& ids, const GenerationResult& result) {
  json::object o{{"id", ids.id},         {"object", object_name(ids.shape, true)},
                 {"created", ids.created_s}, {"model", ids.model},
                 {"choices", json::array{}}, {"usage", usage_json(result)}};
  add_pensieve_fields(o, result);
  return "data: " + json::serialize(o) + "\n\n";
}

}  // namespace pensieve::net
