#pragma once
// The HTTP front end's view of the engine: run one chat turn or completion
// and stream its text. EngineBackend implements it through the front ends'
// one adapter (net/turn_call.hpp); tests give the routes fakes.
#include "net/api_error.hpp"
#include "net/chat_request.hpp"
#include "net/metrics.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>
#include <span>
#include <type_traits>
#include <string>
#include <vector>

namespace pensieve::net {

struct TokenLogprob {
  std::string token;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // top_logprobs alternatives
};

// A piece of the reply: whole UTF-8 characters only.
struct GenerationDelta {
  std::string text;
  std::vector<TokenLogprob> logprobs;
};

struct GenerationResult {
  std::string finish_reason;  // "stop" or "length"
  std::int32_t prompt_tokens = 0;
  std::int32_t completion_tokens = 0;
  std::int32_t cached_tokens = 0;  // prompt tokens served from the KV cache
  std::int32_t truncated_tokens = 0;  // history tokens a conversation dropped to fit the context
};

// Called with the deltas ready to go out, in order: one, or several when the
// engine got ahead of the writer (they go out in one socket write). Returning
// false cancels the generation (the client left). A backend may call it with
// one delta or with a span of them.
class DeltaSink {
 public:
  using Batch = std::span<const GenerationDelta>;
  using Write = std::function<boost::asio::awaitable<bool>(Batch)>;

  template <class F>
    requires std::is_invocable_r_v<boost::asio::awaitable<bool>, F&, Batch>
  DeltaSink(F write) : write_(std::move(write)) {}  // NOLINT: implicit, so a lambda is a sink

  // Each argument must outlive the returned awaitable (co_await it at once).
  boost::asio::awaitable<bool> operator()(Batch deltas) const { return write_(deltas); }
  boost::asio::awaitable<bool> operator()(const GenerationDelta& delta) const { return write_(Batch(&delta, 1)); }

 private:
  Write write_;
};

// A stored conversation as the API shows it.
// Where a conversation's cached KV lives: chunks of block_tokens tokens per tier.
struct ConversationKv {
  std::int32_t block_tokens = 0;
  std::int32_t device = 0, host = 0, disk = 0, dropped = 0, moving = 0;
};

struct ConversationView {
  std::string id;
  std::int64_t created_s = 0;
  std::vector<ChatMessage> messages;
  std::optional<ConversationKv> kv;  // with the messages (GET /v1/conversations/{id})
};

class ChatBackend {
 public:
  virtual ~ChatBackend() = default;
  virtual std::string model_name() const = 0;
  // A chat turn (request.messages) or a text completion (request.prompt).
  virtual boost::asio::awaitable<ApiResult<GenerationResult>> generate(const ChatRequest& request,
                                                                       DeltaSink sink) = 0;

  // The stateful extension; a backend without conversations answers 404.
  virtual boost::asio::awaitable<ApiResult<ConversationView>> create_conversation(const std::string& tenant,
                                                                                  std::optional<std::string> id) {
    (void)tenant;
    (void)id;
    co_return not_found("this server keeps no conversations");
  }
  virtual boost::asio::awaitable<ApiResult<ConversationView>> get_conversation(const std::string& tenant,
                                                                               const std::string& id) {
    (void)tenant;
    co_return not_found("no conversation '" + id + "'");
  }
  virtual std::vector<ConversationView> list_conversations(const std::string& tenant) {
    (void)tenant;
    return {};
  }
  virtual bool delete_conversation(const std::string& tenant, const std::string& id) {
    (void)tenant;
    (void)id;
    return false;
  }
  // The engine's gauges for GET /metrics.
  virtual boost::asio::awaitable<EngineGauges> gauges() { co_return EngineGauges{}; }
};

}  // namespace pensieve::net
