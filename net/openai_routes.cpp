#include "net/openai_routes.hpp"

#include "net/chat_request_json.hpp"
#include "net/openai_json.hpp"

#include <boost/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

namespace pensieve::net {

namespace asio = boost::asio;
namespace json = boost::json;
namespace http = boost::beast::http;

namespace {

struct Routes {
  ChatBackend& backend;
  RouteOptions options;
  std::mt19937_64 id_source{std::random_device{}()};

  std::string next_id() {
    char buf[32];
    std::snprintf(buf, sizeof buf, "chatcmpl-%016llx", static_cast<unsigned long long>(id_source()));
    return buf;
  }
};

// Takes the error by value: callers pass temporaries, and the coroutine
// outlives them.
asio::awaitable<void> send_error(ResponseWriter& w, ApiError e) {
  const std::string body = e.to_json();
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
  auto result = co_await r.backend.generate(req, [&](const GenerationDelta& d) -> asio::awaitable<bool> {
    text += d.text;
    lps.insert(lps.end(), d.logprobs.begin(), d.logprobs.end());
    co_return true;
  });
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
    if (headers_sent) {
      const std::string first = chunk_event(ids_, role_delta(), nullptr, nullptr);
      const bool sent = co_await w_.write_chunk(first);
      client_gone_ = !sent;
    }
    co_return !client_gone_;
  }

  asio::awaitable<bool> delta(const GenerationDelta& d) {
    const bool open = co_await start();
    if (!open) co_return false;
    const std::string event = chunk_event(ids_, content_delta(d.text), logprobs_ ? &d : nullptr, nullptr);
    const bool sent = co_await w_.write_chunk(event);
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
      req, [&reply](const GenerationDelta& d) { return reply.delta(d); });
  if (reply.client_gone()) co_return;
  if (!result) {
    if (!reply.started()) co_return co_await send_error(w, result.error());
    co_return co_await reply.fail_after_start(result.error());
  }
  co_await reply.finish(*result, req.include_usage);
}

asio::awaitable<void> chat_completions(Routes& r, const HttpRequest& http_req, ResponseWriter& w) {
  auto req = parse_chat_request(http_req.body(), r.options.limits);
  if (!req) co_return co_await send_error(w, req.error());
  if (req->model != r.backend.model_name()) {
    co_return co_await send_error(
        w, not_found("The model '" + req->model + "' does not exist; this server serves '" +
                         r.backend.model_name() + "'",
                     "model_not_found"));
  }
  if (auto h = http_req.find("X-Conversation-Id"); h != http_req.end() && !req->conversation_id) {
    req->conversation_id = std::string(h->value());
  }
  CompletionIds ids{r.next_id(), r.backend.model_name(), r.options.now_s()};
  if (req->stream) {
    co_await complete_streamed(r, *req, std::move(ids), w);
  } else {
    co_await complete_whole(r, *req, std::move(ids), w);
  }
}

asio::awaitable<void> route(std::shared_ptr<Routes> r, const HttpRequest& req, ResponseWriter& w) {
  std::string_view target = req.target();
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  auto method_not_allowed = [&]() {
    return send_error(w, ApiError{405, "invalid_request_error",
                                  "method " + std::string(req.method_string()) + " not allowed on " +
                                      std::string(target),
                                  {}, {}});
  };
  if (target == "/health") {
    co_await w.send(200, "application/json", R"({"status":"ok"})");
  } else if (target == "/v1/models") {
    if (req.method() != http::verb::get) co_return co_await method_not_allowed();
    co_await list_models(*r, w);
  } else if (target == "/v1/chat/completions") {
    if (req.method() != http::verb::post) co_return co_await method_not_allowed();
    co_await chat_completions(*r, req, w);
  } else {
    co_await send_error(w, not_found("no route for " + std::string(target)));
  }
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
  auto routes = std::make_shared<Routes>(Routes{backend, std::move(options)});
  return [routes](const HttpRequest& req, ResponseWriter& w) { return route(routes, req, w); };
}

}  // namespace pensieve::net
