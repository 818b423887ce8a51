#include "net/chat_request_json.hpp"

#include "net/turn_call.hpp"

#include <boost/json.hpp>

#include <charconv>
#include <cmath>
#include <limits>

namespace pensieve::net {

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxCacheSaltBytes = 256;

// Reads optional fields of a JSON object with type and range checks; the
// first failure is kept and every later read is a no-op.
class FieldReader {
 public:
  explicit FieldReader(const json::object& o) : o_(o) {}

  std::optional<ApiError> error;

  const json::value* find(std::string_view key) {
    if (error) return nullptr;
    auto it = o_.find(key);
    if (it == o_.end() || it->value().is_null()) return nullptr;
    return &it->value();
  }

  void number(std::string_view key, float& out, double lo, double hi) {
    const json::value* v = find(key);
    if (!v) return;
    if (!v->is_number()) return fail(key, "must be a number");
    const double d = v->to_number<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
      return fail(key, "must be between " + fmt(lo) + " and " + fmt(hi));
    }
    out = float(d);
  }

  template <class Int>
  void integer(std::string_view key, Int& out, std::int64_t lo, std::int64_t hi) {
    const json::value* v = find(key);
    if (!v) return;
    std::int64_t i = 0;
    if (v->is_int64()) {
      i = v->get_int64();
    } else if (v->is_uint64() && v->get_uint64() <= std::uint64_t(INT64_MAX)) {
      i = std::int64_t(v->get_uint64());
    } else {
      return fail(key, "must be an integer");
    }
    if (i < lo || i > hi) return fail(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    out = Int(i);
  }

  void boolean(std::string_view key, bool& out) {
    const json::value* v = find(key);
    if (!v) return;
    if (!v->is_bool()) return fail(key, "must be a boolean");
    out = v->get_bool();
  }

  void fail(std::string_view key, std::string what) {
    if (!error) error = bad_request("'" + std::string(key) + "' " + what, std::string(key));
  }

 private:
  static std::string fmt(double d) {
    json::value v(d);
    return json::serialize(v);
  }
  const json::object& o_;
};

ApiResult<std::string> message_content(const json::value& content, std::size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  if (content.is_string()) return std::string(content.get_string());
  if (!content.is_array()) return bad_request("'" + param + "' must be a string or an array of parts", param);
  std::string text;
  for (const json::value& part : content.get_array()) {
    const json::object* p = part.if_object();
    const json::value* type = p ? p->if_contains("type") : nullptr;
    const json::value* t = p ? p->if_contains("text") : nullptr;
    if (!type || !type->is_string() || type->get_string() != "text" || !t || !t->is_string()) {
      return bad_request("'" + param + "' parts must be {\"type\": \"text\", \"text\": string}", param);
    }
    text += t->get_string();
  }
  return text;
}

bool is_string(const json::value* v) { return v != nullptr && v->is_string(); }

// An assistant's tool_calls ([{id, type: "function", function: {name,
// arguments}}]) and a tool result's tool_call_id and name, kept as the
// client sent them (the template renders them).
std::optional<ApiError> parse_tool_fields(const json::object& m, const std::string& param, ChatMessage& out) {
  if (const json::value* calls = m.if_contains("tool_calls"); calls && !calls->is_null()) {
    const std::string p = param + ".tool_calls";
    if (out.role != "assistant") return bad_request("'" + p + "' is for assistant messages", p);
    if (!calls->is_array()) return bad_request("'" + p + "' must be an array", p);
    for (const json::value& call : calls->get_array()) {
      const json::object* c = call.if_object();
      const json::object* f = c && c->contains("function") ? c->at("function").if_object() : nullptr;
      const bool ok = c && is_string(c->if_contains("id")) && f && is_string(f->if_contains("name")) &&
                      is_string(f->if_contains("arguments"));
      if (!ok) {
        return bad_request("'" + p + "' entries must be {\"id\": string, \"type\": \"function\", "
                           "\"function\": {\"name\": string, \"arguments\": string}}", p);
      }
    }
    if (!calls->get_array().empty()) out.tool_calls = json::serialize(*calls);
  }
  if (const json::value* id = m.if_contains("tool_call_id"); id && !id->is_null()) {
    if (!id->is_string()) return bad_request("'" + param + ".tool_call_id' must be a string", param + ".tool_call_id");
    out.tool_call_id = std::string(id->get_string());
  }
  if (const json::value* name = m.if_contains("name"); name && !name->is_null()) {
    if (!name->is_string()) return bad_request("'" + param + ".name' must be a string", param + ".name");
    out.name = std::string(name->get_string());
  }
  if (out.role == "tool" && out.tool_call_id.empty()) {
    return bad_request("'" + param + ".tool_call_id' is required for a tool message", param + ".tool_call_id");
  }
  return std::nullopt;
}

std::optional<ApiError> refuse_unsupported(const json::object& o);

// tools, tool_choice, and the options Pensieve cannot honour (they need
// constrained decoding or logit biasing), refused rather than ignored.
std::optional<ApiError> parse_tools(const json::object& o, ChatRequest& req) {
  if (const json::value* tools = o.if_contains("tools"); tools && !tools->is_null()) {
    if (!tools->is_array()) return bad_request("'tools' must be an array", "tools");
    for (const json::value& tool : tools->get_array()) {
      const json::object* t = tool.if_object();
      const json::object* f = t && t->contains("function") ? t->at("function").if_object() : nullptr;
      const json::value* type = t ? t->if_contains("type") : nullptr;
      if (!is_string(type) || type->get_string() != "function" || !f || !is_string(f->if_contains("name"))) {
        return bad_request("'tools' entries must be {\"type\": \"function\", \"function\": {\"name\": string, ...}}",
                           "tools");
      }
    }
    if (!tools->get_array().empty()) req.chat.tools = json::serialize(*tools);
  }
  if (const json::value* choice = o.if_contains("tool_choice"); choice && !choice->is_null()) {
    if (!choice->is_string() || (choice->get_string() != "auto" && choice->get_string() != "none")) {
      return bad_request("'tool_choice' may be \"auto\" or \"none\": forcing a tool call (\"required\" or a "
                         "named function) needs constrained decoding, which this server does not do",
                         "tool_choice");
    }
    req.chat.tool_choice = json::serialize(*choice);
  }
  return refuse_unsupported(o);
}

// cache_control: {"type": "ephemeral"} and an optional ttl, "<n>s",
// "<n>m", "<n>h" or an integer of seconds, within [1 s, kMaxPinTtlSeconds].
std::optional<ApiError> parse_cache_control(const json::value& v, ChatRequest& req) {
  const std::string range = "'cache_control.ttl' must be \"<n>s\", \"<n>m\", \"<n>h\" or an integer of seconds, "
                            "from 1 s to " + std::to_string(kMaxPinTtlSeconds) + " s";
  const json::object* c = v.if_object();
  const json::value* type = c ? c->if_contains("type") : nullptr;
  if (!type || !type->is_string() || type->get_string() != "ephemeral") {
    return bad_request("'cache_control' must be {\"type\": \"ephemeral\", \"ttl\": \"5m\" | seconds}",
                       "cache_control");
  }
  for (const auto& kv : *c) {
    if (kv.key() != "type" && kv.key() != "ttl") {
      return bad_request("'cache_control' has an unknown field '" + std::string(kv.key()) + "'", "cache_control");
    }
  }
  std::int64_t seconds = kDefaultPinTtlSeconds;
  if (const json::value* ttl = c->if_contains("ttl"); ttl && !ttl->is_null()) {
    if (ttl->is_int64()) {
      seconds = ttl->get_int64();
    } else if (ttl->is_string() && ttl->get_string().size() >= 2) {
      const std::string_view text = ttl->get_string();
      const char unit = text.back();
      const std::int64_t scale = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : 0;
      std::int64_t n = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size() - 1, n);
      if (scale == 0 || ec != std::errc() || end != text.data() + text.size() - 1 || n > kMaxPinTtlSeconds) {
        return bad_request(range, "cache_control");
      }
      seconds = n * scale;
    } else {
      return bad_request(range, "cache_control");
    }
  }
  if (seconds < 1 || seconds > kMaxPinTtlSeconds) return bad_request(range, "cache_control");
  req.pin_ttl_s = seconds;
  return std::nullopt;
}

std::optional<ApiError> refuse_unsupported(const json::object& o) {
  if (const json::value* format = o.if_contains("response_format"); format && !format->is_null()) {
    const json::object* f = format->if_object();
    const json::value* type = f ? f->if_contains("type") : nullptr;
    if (!is_string(type) || type->get_string() != "text") {
      return bad_request("'response_format' other than {\"type\": \"text\"} is not supported: JSON output "
                         "needs constrained decoding, which this server does not do",
                         "response_format");
    }
  }
  if (const json::value* bias = o.if_contains("logit_bias"); bias && !bias->is_null()) {
    if (!bias->is_object() || !bias->get_object().empty()) {
      return bad_request("'logit_bias' is not supported", "logit_bias");
    }
  }
  return std::nullopt;
}

ApiResult<std::vector<ChatMessage>> parse_messages(const json::value* v, const RequestLimits& limits) {
  if (!v) return bad_request("'messages' is required", "messages");
  if (!v->is_array()) return bad_request("'messages' must be an array", "messages");
  const json::array& arr = v->get_array();
  if (arr.empty()) return bad_request("'messages' must not be empty", "messages");
  if (arr.size() > limits.max_messages) {
    return bad_request("'messages' has more than " + std::to_string(limits.max_messages) + " entries",
                       "messages");
  }
  std::vector<ChatMessage> out;
  out.reserve(arr.size());
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string param = "messages[" + std::to_string(i) + "]";
    const json::object* m = arr[i].if_object();
    if (!m) return bad_request("'" + param + "' must be an object", param);
    const json::value* role = m->if_contains("role");
    if (!role || !role->is_string()) return bad_request("'" + param + ".role' must be a string", param + ".role");
    const std::string r(role->get_string());  // known roles: validate_turn
    ChatMessage message{r == "developer" ? "system" : r, {}};  // OpenAI's newer name
    if (auto e = parse_tool_fields(*m, param, message)) return *e;
    const json::value* content = m->if_contains("content");
    // An assistant message that calls tools may have no content.
    const bool may_be_empty = r == "assistant" && !message.tool_calls.empty();
    if (content == nullptr || content->is_null()) {
      if (!may_be_empty) return bad_request("'" + param + ".content' is required", param + ".content");
    } else {
      auto text = message_content(*content, i);
      if (!text) return text.error();
      message.content = std::move(*text);
    }
    out.push_back(std::move(message));
  }
  return out;
}

std::optional<ApiError> parse_stop(FieldReader& r, ChatRequest& req) {
  const json::value* v = r.find("stop");
  if (!v) return r.error;
  if (v->is_string()) {
    req.stop.emplace_back(v->get_string());
  } else if (v->is_array()) {
    for (const json::value& s : v->get_array()) {
      if (!s.is_string()) return bad_request("'stop' must be a string or an array of strings", "stop");
      req.stop.emplace_back(s.get_string());
    }
  } else {
    return bad_request("'stop' must be a string or an array of strings", "stop");
  }
  return std::nullopt;
}

std::optional<ApiError> parse_options(const json::object& o, ChatRequest& req) {
  FieldReader r(o);
  // Types only here; the bounds are the adapter's (validate_turn), the same
  // for every front end.
  constexpr double any = std::numeric_limits<double>::infinity();
  constexpr std::int64_t int32_min = INT32_MIN, int32_max = INT32_MAX;
  r.integer("max_tokens", req.max_tokens, int32_min, int32_max);
  r.integer("max_completion_tokens", req.max_tokens, int32_min, int32_max);
  r.integer("min_tokens", req.min_tokens, int32_min, int32_max);
  r.number("temperature", req.temperature, -any, any);
  r.number("top_p", req.top_p, -any, any);
  r.integer("top_k", req.top_k, int32_min, int32_max);
  r.number("min_p", req.min_p, -any, any);
  r.number("presence_penalty", req.presence_penalty, -any, any);
  r.number("frequency_penalty", req.frequency_penalty, -any, any);
  r.number("repetition_penalty", req.repetition_penalty, -any, any);
  std::int64_t seed = 0;
  if (r.find("seed")) {
    r.integer("seed", seed, INT64_MIN, INT64_MAX);
    req.seed = std::uint64_t(seed);
  }
  r.boolean("logprobs", req.logprobs);
  r.integer("top_logprobs", req.top_logprobs, int32_min, int32_max);
  r.boolean("stream", req.stream);
  r.boolean("ignore_eos", req.ignore_eos);
  std::int32_t n = 1;
  r.integer("n", n, 1, 1);  // one choice per request
  if (r.error) return r.error;
  if (auto e = parse_stop(r, req)) return e;
  if (const json::value* so = r.find("stream_options")) {
    const json::object* opts = so->if_object();
    if (!opts) return bad_request("'stream_options' must be an object", "stream_options");
    FieldReader sr(*opts);
    sr.boolean("include_usage", req.include_usage);
    if (sr.error) return bad_request("'stream_options.include_usage' must be a boolean", "stream_options");
  }
  if (const json::value* salt = r.find("cache_salt")) {
    if (!salt->is_string() || salt->get_string().empty() || salt->get_string().size() > kMaxCacheSaltBytes) {
      return bad_request("'cache_salt' must be a string of 1 to " + std::to_string(kMaxCacheSaltBytes) + " bytes",
                         "cache_salt");
    }
    req.cache_salt = std::string(salt->get_string());
  }
  if (const json::value* cc = r.find("cache_control")) {
    if (auto e = parse_cache_control(*cc, req)) return e;
  }
  if (const json::value* c = r.find("conversation")) {
    if (!c->is_string() || c->get_string().empty()) {
      return bad_request("'conversation' must be a non-empty string", "conversation");
    }
    req.conversation_id = std::string(c->get_string());
  }
  return r.error;
}

// A non-empty JSON array of integers that fit a token id, or nothing (the
// range against the vocabulary is the engine's check).
std::optional<std::vector<std::int32_t>> token_ids(const json::value& v) {
  const json::array* a = v.if_array();
  if (a == nullptr || a->empty()) return std::nullopt;
  std::vector<std::int32_t> ids;
  ids.reserve(a->size());
  for (const json::value& x : *a) {
    if (!x.is_int64() || x.get_int64() < 0 || x.get_int64() > std::numeric_limits<std::int32_t>::max()) {
      return std::nullopt;
    }
    ids.push_back(std::int32_t(x.get_int64()));
  }
  return ids;
}

}  // namespace

ApiResult<ChatRequest> parse_completion_request(std::string_view body, const RequestLimits& limits) {
  boost::system::error_code ec;
  json::value doc = json::parse(body, ec);
  if (ec) return bad_request("request body is not valid JSON: " + ec.message());
  json::object* o = doc.if_object();
  if (!o) return bad_request("request body must be a JSON object");
  ChatRequest req;
  req.max_tokens = 16;  // the legacy API's default
  const json::value* model = o->if_contains("model");
  if (!model || !model->is_string()) return bad_request("'model' is required and must be a string", "model");
  req.model = std::string(model->get_string());
  const json::value* prompt = o->if_contains("prompt");
  // One prompt per request: a string, token ids, or an array of one of either.
  if (prompt && prompt->is_array() && prompt->get_array().size() == 1 &&
      (prompt->get_array()[0].is_string() || prompt->get_array()[0].is_array())) {
    prompt = &prompt->get_array()[0];
  }
  const std::string prompt_shape =
      "'prompt' is required: a string or an array of token ids (or an array of one of either)";
  if (!prompt) return bad_request(prompt_shape, "prompt");
  if (prompt->is_string()) {
    req.prompt = std::string(prompt->get_string());
  } else if (auto ids = token_ids(*prompt)) {
    req.prompt_tokens = std::move(*ids);
  } else {
    return bad_request(prompt_shape, "prompt");
  }
  if (const json::value* echo = o->if_contains("echo"); echo && echo->is_bool() && echo->get_bool()) {
    return bad_request("'echo' is not supported", "echo");
  }
  if (const json::value* lp = o->if_contains("logprobs"); lp && !lp->is_null()) {
    if (!lp->is_int64() || lp->get_int64() < 0 || lp->get_int64() > 5) {
      return bad_request("'logprobs' must be an integer between 0 and 5", "logprobs");
    }
    req.top_logprobs = std::int32_t(lp->get_int64());
    req.logprobs = true;
    o->erase("logprobs");
  }
  if (o->contains("conversation")) return bad_request("'conversation' is for chat completions", "conversation");
  if (auto e = refuse_unsupported(*o)) return *e;
  const std::int32_t top = req.top_logprobs;
  const bool logprobs = req.logprobs;
  if (auto e = parse_options(*o, req)) return *e;
  req.logprobs = logprobs;
  req.top_logprobs = top;
  if (auto e = validate_turn(turn_request(req, 0), limits)) return api_error(*e);
  return req;
}

ApiResult<ChatRequest> parse_chat_request(std::string_view body, const RequestLimits& limits) {
  boost::system::error_code ec;
  json::value doc = json::parse(body, ec);
  if (ec) return bad_request("request body is not valid JSON: " + ec.message());
  const json::object* o = doc.if_object();
  if (!o) return bad_request("request body must be a JSON object");
  ChatRequest req;
  const json::value* model = o->if_contains("model");
  if (!model || !model->is_string()) return bad_request("'model' is required and must be a string", "model");
  req.model = std::string(model->get_string());
  auto messages = parse_messages(o->if_contains("messages"), limits);
  if (!messages) return messages.error();
  req.messages = std::move(*messages);
  if (auto e = parse_tools(*o, req)) return *e;
  if (auto e = parse_options(*o, req)) return *e;
  if (auto e = validate_turn(turn_request(req, 0), limits)) return api_error(*e);
  return req;
}

}  // namespace pensieve::net
