#include "net/openai_routes.hpp"

#include "net/chat_request_json.hpp"
#include "net/openai_json.hpp"

#include <boost/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>

namespace pensieve::net {

namespace asio = boost::asio;
namespace json = boost::json;
namespace http = boost::beast::http;

namespace {

struct Routes {
  ChatBackend& backend;
  RouteOptions options;
  // The routes serve every HTTP I/O thread (HttpServerGroup).
  std::mutex id_mutex;
  std::mt19937_64 id_source{std::random_device{}()};  // guarded by id_mutex

  std::string next_id(const char* prefix = "chatcmpl-") {
    std::uint64_t id = 0;
    {
      std::lock_guard lock(id_mutex);
      id = id_source();
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, "%s%016llx", prefix, static_cast<unsigned long long>(id));
    return buf;
  }
};

// Records each response's status for the metrics.
class StatusRecorder final : public ResponseWriter {
 public:
  explicit StatusRecorder(ResponseWriter& inner) : inner_(inner) {}
  int status = 0;
  asio::awaitable<bool> send(int s, std::string_view content_type, std::string body) override {
    status = s;
    return inner_.send(s, content_type, std::move(body));
  }
  asio::awaitable<bool> start_stream(int s, std::string_view content_type) override {
    status = s;
    return inner_.start_stream(s, content_type);
  }
  void add_header(std::string name, std::string value) override {
    inner_.add_header(std::move(name), std::move(value));
  }
  asio::awaitable<bool> write_chunk(std::string_view data) override { return inner_.write_chunk(data); }
  asio::awaitable<bool> end_stream() override { return inner_.end_stream(); }
  void watch_for_disconnect() override { inner_.watch_for_disconnect(); }
  bool disconnected() const override { return inner_.disconnected(); }

 private:
  ResponseWriter& inner_;
};

// Takes the error by value: callers pass temporaries, and the coroutine
// outlives them.
asio::awaitable<void> send_error(ResponseWriter& w, ApiError e) {
  const std::string body = e.to_json();
  if (e.retry_after_s > 0) w.add_header("Retry-After", std::to_string(e.retry_after_s));
  co_await w.send(e.status, "application/json", body);
}

asio::awaitable<void> list_models(Routes& r, ResponseWriter& w) {
  json::object model{{"id", r.backend.model_name()},
                     {"object", "model"},
                     {"created", r.options.now_s()},
                     {"owned_by", "pensieve"}};
  json::object body{{"object", "list"}, {"data", json::array{std::move(model)}}};
  co_await w.send(200, "application/json", json::serialize(body));
}

asio::awaitable<void> complete_whole(Routes& r, const ChatRequest& req, CompletionIds ids,
                                     ResponseWriter& w) {
  std::string text;
  std::vector<TokenLogprob> lps;
  // Nothing is written until the end: watch the connection meanwhile, so a
  // client that leaves cancels its turn at the next delta, not after max_tokens.
  w.watch_for_disconnect();
  auto result = co_await r.backend.generate(req, [&](DeltaSink::Batch deltas) -> asio::awaitable<bool> {
    for (const GenerationDelta& d : deltas) {
      text += d.text;
      lps.insert(lps.end(), d.logprobs.begin(), d.logprobs.end());
    }
    co_return !w.disconnected();
  });
  if (w.disconnected()) co_return;  // nobody to answer; the turn was cancelled
  if (!result) co_return co_await send_error(w, result.error());
  co_await w.send(200, "application/json", completion_json(ids, text, lps, req.logprobs, *result));
}

// JSON built outside coroutines: GCC 12 mis-compiles initializer lists of
// string literals inside coroutine bodies ("array used as initializer").
json::object role_delta() { return json::object{{"role", "assistant"}, {"content", ""}}; }
json::object content_delta(const std::string& text) { return json::object{{"content", text}}; }

// The state of one streamed reply: headers go out with the first delta (so an
// error before any token is still a plain HTTP error).
class SseReply {
 public:
  SseReply(ResponseWriter& w, CompletionIds ids, bool logprobs)
      : w_(w), ids_(std::move(ids)), logprobs_(logprobs) {}

  bool started() const { return started_; }
  bool client_gone() const { return client_gone_; }

  // Every co_await below is a statement of its own, on named values: GCC 12
  // mis-compiles co_await inside || / && and around some temporaries.
  asio::awaitable<bool> start() {
    if (started_) co_return !client_gone_;
    started_ = true;
    const bool headers_sent = co_await w_.start_stream(200, "text/event-stream");
    client_gone_ = !headers_sent;
    if (headers_sent && ids_.shape == ApiShape::chat) {
      const std::string first = chunk_event(ids_, role_delta(), nullptr, nullptr);
      const bool sent = co_await w_.write_chunk(first);
      client_gone_ = !sent;
    }
    co_return !client_gone_;
  }

  // Several deltas: one `data:` event each, all in one write.
  asio::awaitable<bool> deltas(DeltaSink::Batch ds) {
    const bool open = co_await start();
    if (!open) co_return false;
    std::string events;
    for (const GenerationDelta& d : ds) {
      events += chunk_event(ids_, content_delta(d.text), logprobs_ ? &d : nullptr, nullptr);
    }
    const bool sent = co_await w_.write_chunk(events);
    client_gone_ = !sent;
    co_return sent;
  }

  asio::awaitable<void> finish(const GenerationResult& result, bool include_usage) {
    const bool open = co_await start();
    if (!open) co_return;
    const std::string last = chunk_event(ids_, json::object{}, nullptr, result.finish_reason.c_str());
    co_await w_.write_chunk(last);
    if (include_usage) {
      const std::string usage = usage_event(ids_, result);
      co_await w_.write_chunk(usage);
    }
    co_await w_.write_chunk("data: [DONE]\n\n");
    co_await w_.end_stream();
  }

  asio::awaitable<void> fail_after_start(const ApiError& e) {
    const std::string event = "data: " + e.to_json() + "\n\n";
    co_await w_.write_chunk(event);
    co_await w_.end_stream();
  }

 private:
  ResponseWriter& w_;
  CompletionIds ids_;
  bool logprobs_;
  bool started_ = false;
  bool client_gone_ = false;
};

asio::awaitable<void> complete_streamed(Routes& r, const ChatRequest& req, CompletionIds ids,
                                        ResponseWriter& w) {
  SseReply reply(w, std::move(ids), req.logprobs);
  auto result = co_await r.backend.generate(
      req, [&reply](DeltaSink::Batch ds) { return reply.deltas(ds); });
  if (reply.client_gone()) co_return;
  if (!result) {
    if (!reply.started()) co_return co_await send_error(w, result.error());
    co_return co_await reply.fail_after_start(result.error());
  }
  co_await reply.finish(*result, req.include_usage);
}

asio::awaitable<void> completions(Routes& r, const HttpRequest& http_req, ResponseWriter& w,
                                  const std::string& tenant, ApiShape shape) {
  auto req = shape == ApiShape::chat ? parse_chat_request(http_req.body(), r.options.limits)
                                     : parse_completion_request(http_req.body(), r.options.limits);
  if (!req) co_return co_await send_error(w, req.error());
  if (req->model != r.backend.model_name()) {
    co_return co_await send_error(
        w, not_found("The model '" + req->model + "' does not exist; this server serves '" +
                         r.backend.model_name() + "'",
                     "model_not_found"));
  }
  if (auto h = http_req.find("X-Conversation-Id"); shape == ApiShape::chat && h != http_req.end() &&
                                                    !req->conversation_id) {
    req->conversation_id = std::string(h->value());
  }
  req->tenant = tenant;
  CompletionIds ids{r.next_id(shape == ApiShape::chat ? "chatcmpl-" : "cmpl-"), r.backend.model_name(),
                    r.options.now_s(), shape};
  if (req->stream) {
    co_await complete_streamed(r, *req, std::move(ids), w);
  } else {
    co_await complete_whole(r, *req, std::move(ids), w);
  }
}

json::object conversation_json(const ConversationView& c, bool with_messages) {
  json::object o{{"id", c.id}, {"object", "conversation"}, {"created", c.created_s}};
  if (with_messages) {
    json::array messages;
    for (const auto& m : c.messages) messages.push_back(json::object{{"role", m.role}, {"content", m.content}});
    o["messages"] = std::move(messages);
  }
  if (c.kv) {
    o["kv"] = json::object{{"block_tokens", c.kv->block_tokens},
                           {"chunks", json::object{{"device", c.kv->device},
                                                   {"host", c.kv->host},
                                                   {"disk", c.kv->disk},
                                                   {"dropped", c.kv->dropped}}},
                           {"moving", c.kv->moving}};
  }
  return o;
}

asio::awaitable<void> create_conversation(Routes& r, const HttpRequest& req, ResponseWriter& w,
                                          const std::string& tenant) {
  std::optional<std::string> id;
  if (!req.body().empty()) {
    boost::system::error_code ec;
    json::value doc = json::parse(req.body(), ec);
    if (ec || !doc.is_object()) co_return co_await send_error(w, bad_request("request body must be a JSON object"));
    if (const json::value* v = doc.as_object().if_contains("id"); v && !v->is_null()) {
      if (!v->is_string()) co_return co_await send_error(w, bad_request("'id' must be a string", "id"));
      id = std::string(v->get_string());
    }
  }
  auto created = co_await r.backend.create_conversation(tenant, std::move(id));
  if (!created) co_return co_await send_error(w, created.error());
  const std::string body = json::serialize(conversation_json(*created, false));
  co_await w.send(200, "application/json", body);
}

asio::awaitable<void> conversation(Routes& r, const HttpRequest& req, ResponseWriter& w, const std::string& tenant,
                                   const std::string& id) {
  if (req.method() == http::verb::delete_) {
    if (!r.backend.delete_conversation(tenant, id)) {
      co_return co_await send_error(w, not_found("no conversation '" + id + "'", "not_found"));
    }
    json::object body{{"id", id}, {"object", "conversation.deleted"}, {"deleted", true}};
    co_await w.send(200, "application/json", json::serialize(body));
    co_return;
  }
  auto found = co_await r.backend.get_conversation(tenant, id);
  if (!found) co_return co_await send_error(w, found.error());
  const std::string body = json::serialize(conversation_json(*found, true));
  co_await w.send(200, "application/json", body);
}

asio::awaitable<void> list_conversations(Routes& r, ResponseWriter& w, const std::string& tenant) {
  json::array data;
  for (const auto& c : r.backend.list_conversations(tenant)) data.push_back(conversation_json(c, false));
  json::object body{{"object", "list"}, {"data", std::move(data)}};
  co_await w.send(200, "application/json", json::serialize(body));
}

asio::awaitable<void> metrics(Routes& r, ResponseWriter& w) {
  const EngineGauges g = co_await r.backend.gauges();
  const std::string body = r.options.metrics ? r.options.metrics->render(g) : ServerMetrics().render(g);
  co_await w.send(200, "text/plain; version=0.0.4", body);
}

// The route's name in the metrics (ids folded, so labels stay few).
std::string route_label(std::string_view target) {
  if (target.starts_with("/v1/conversations/")) return "/v1/conversations/{id}";
  for (std::string_view known : {"/health", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/completions",
                                 "/v1/conversations"}) {
    if (target == known) return std::string(known);
  }
  return "other";
}

asio::awaitable<void> dispatch(Routes& r, const HttpRequest& req, ResponseWriter& w, std::string_view target);

asio::awaitable<void> dispatch(Routes& r, const HttpRequest& req, ResponseWriter& w, std::string_view target) {
  auto method_not_allowed = [&]() {
    return send_error(w, ApiError{405, "invalid_request_error",
                                  "method " + std::string(req.method_string()) + " not allowed on " +
                                      std::string(target),
                                  {}, {}});
  };
  if (target == "/health") {
    co_await w.send(200, "application/json", R"({"status":"ok"})");
    co_return;
  }
  if (target == "/metrics") {
    if (req.method() != http::verb::get) co_return co_await method_not_allowed();
    co_return co_await metrics(r, w);
  }
  // Everything else may need a key; its tenant scopes the conversations.
  std::string tenant;
  if (r.options.keys && r.options.keys->required()) {
    auto h = req.find(http::field::authorization);
    auto t = r.options.keys->tenant_for(h == req.end() ? std::string_view() : std::string_view(h->value()));
    if (!t) {
      // A named value: GCC 12 destroys braced temporaries in co_await twice.
      ApiError unauthorized{401, "invalid_request_error",
                            "Incorrect API key provided: pass it as 'Authorization: Bearer KEY'", {}, "invalid_api_key"};
      co_return co_await send_error(w, std::move(unauthorized));
    }
    tenant = std::move(*t);
  }
  if (target == "/v1/models") {
    if (req.method() != http::verb::get) co_return co_await method_not_allowed();
    co_await list_models(r, w);
  } else if (target == "/v1/chat/completions" || target == "/v1/completions") {
    if (req.method() != http::verb::post) co_return co_await method_not_allowed();
    co_await completions(r, req, w, tenant, target == "/v1/completions" ? ApiShape::text : ApiShape::chat);
  } else if (target == "/v1/conversations") {
    if (req.method() == http::verb::post) {
      co_await create_conversation(r, req, w, tenant);
    } else if (req.method() == http::verb::get) {
      co_await list_conversations(r, w, tenant);
    } else {
      co_await method_not_allowed();
    }
  } else if (target.starts_with("/v1/conversations/") && target.size() > 18 &&
             target.find('/', 18) == std::string_view::npos) {
    if (req.method() != http::verb::get && req.method() != http::verb::delete_) co_return co_await method_not_allowed();
    co_await conversation(r, req, w, tenant, std::string(target.substr(18)));
  } else {
    co_await send_error(w, not_found("no route for " + std::string(target)));
  }
}

asio::awaitable<void> route(std::shared_ptr<Routes> r, const HttpRequest& req, ResponseWriter& w) {
  std::string_view target = req.target();
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  StatusRecorder recorder(w);
  co_await dispatch(*r, req, recorder, target);
  if (r->options.metrics) r->options.metrics->request(route_label(target), recorder.status);
}

}  // namespace

HttpHandler make_openai_routes(ChatBackend& backend, RouteOptions options) {
  if (!options.now_s) {
    options.now_s = [] {
      return std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
  auto routes = std::make_shared<Routes>(backend, std::move(options));
  return [routes](const HttpRequest& req, ResponseWriter& w) { return route(routes, req, w); };
}

}  // namespace pensieve::net
