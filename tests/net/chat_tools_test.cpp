// Tools in the chat API, end to end over loopback: the tool role, an
// assistant's tool_calls and a request's tools reach the model's (Jinja)
// template (here --chat-template FILE), stateless and by conversation id;
// what the server cannot honour (response_format, logit_bias, forced tool
// choice) is refused with a 400 naming the field, never ignored.
#include "gpu/text/chat_template.hpp"
#include "gpu/text/tokenizer.hpp"
#include "tests/actors/engine_fixture.hpp"
#include "tests/net/http_client.hpp"
#include "tests/net/server_fixture.hpp"
#include "tests/temp_dir.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <fstream>

using namespace pensieve;
namespace http = boost::beast::http;
namespace json = boost::json;

namespace {

// A small tools-aware template (the real ones are longer than stories260K's
// 512-token context once they list tools).
constexpr std::string_view tools_template =
    "{% if tools %}[T]{% for t in tools %}{{ t.function.name }};{% endfor %}[/T]{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'assistant' and m.tool_calls %}[A]{% for c in m.tool_calls %}"
    "{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}[/A]"
    "{% elif m.role == 'tool' %}[R {{ m.tool_call_id }}]{{ m.content }}[/R]"
    "{% else %}[{{ m.role }}]{{ m.content }}[/{{ m.role }}]{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";

constexpr std::string_view tools_json =
    R"([{"type":"function","function":{"name":"add","parameters":{"type":"object"}}}])";

std::string request_body(const std::string& model, const json::array& messages, const std::string& extra = {}) {
  json::object body{{"model", model}, {"messages", messages}, {"max_tokens", 3}, {"temperature", 0},
                    {"tools", json::parse(tools_json)}};
  std::string s = json::serialize(body);
  if (!extra.empty()) s.insert(s.size() - 1, "," + extra);
  return s;
}

struct ToolServer {
  testing::TempDir dir{"chat-tools"};
  std::string template_path;
  std::unique_ptr<testing::TestServer> server;

  ToolServer() {
    template_path = (dir.path() / "tools.jinja").string();
    std::ofstream(template_path) << tools_template;
    server = std::make_unique<testing::TestServer>(
        testing::stories_model(), [this](actors::EngineOptions& o) { o.chat_template = template_path; });
  }
  testing::HttpReply post(const std::string& body) {
    return testing::http_call(server->port(), http::verb::post, "/v1/chat/completions", body);
  }
  std::string request(const json::array& messages, const std::string& extra = {}) const {
    return request_body(server->engine->model_name(), messages, extra);
  }
};

json::array tool_history() {
  return json::parse(R"([
    {"role": "system", "content": "You add."},
    {"role": "user", "content": "Add 2 and 3."},
    {"role": "assistant", "content": null,
     "tool_calls": [{"id": "call_7", "type": "function",
                     "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}}]},
    {"role": "tool", "tool_call_id": "call_7", "content": "5"},
    {"role": "user", "content": "And now?"}
  ])").as_array();
}


// The prompt the template renders for `messages`, as tokens.
std::size_t expected_prompt_tokens(const json::array& messages) {
  auto weights = testing::stories_model();
  auto tok = model::Tokenizer::from_data(*weights.tokenizer).value();
  model::ChatSpecialTexts special;
  special.bos = tok.token_to_piece(*tok.bos_id(), true);
  special.eos = tok.token_to_piece(*tok.eos_id(), true);
  auto t = model::ChatTemplate::from_jinja(tools_template, special, "test").value();
  std::vector<model::ChatMessage> ms;
  for (const auto& v : messages) {
    const auto& o = v.as_object();
    model::ChatMessage m{std::string(o.at("role").as_string()), {}};
    if (o.at("content").is_string()) m.content = std::string(o.at("content").as_string());
    if (o.contains("tool_calls")) m.tool_calls = json::serialize(o.at("tool_calls"));
    if (o.contains("tool_call_id")) m.tool_call_id = std::string(o.at("tool_call_id").as_string());
    ms.push_back(std::move(m));
  }
  auto rendered = t.continuation(ms, 0, {}, true, {std::string(tools_json), {}}).value();
  // The arguments string reached the template as an object.
  CHECK_THAT(rendered.text, Catch::Contains(R"(add({"a": 2, "b": 3}))"));
  CHECK_THAT(rendered.text, Catch::Contains("[R call_7]5[/R]"));
  CHECK_THAT(rendered.text, Catch::StartsWith("[T]add;[/T]"));
  std::vector<model::TextPiece> pieces;
  for (const auto& s : rendered.segments) pieces.push_back({s.text, s.markup});
  return tok.encode_pieces(pieces, tok.adds_bos_by_default()).size();
}

std::string error_param(const testing::HttpReply& r) {
  const json::value doc = json::parse(r.body);
  const json::object& e = doc.at("error").as_object();
  return e.at("param").is_string() ? std::string(e.at("param").as_string()) : "";
}

}  // namespace

TEST_CASE("a stateless request with a tool call and its result renders through the model's template",
          "[net][tools]") {
  ToolServer s;
  const auto messages = tool_history();
  auto r = s.post(s.request(messages));
  REQUIRE(r.status == 200);
  const json::value doc = json::parse(r.body);
  const json::object& usage = doc.at("usage").as_object();
  CHECK(std::size_t(usage.at("prompt_tokens").as_int64()) == expected_prompt_tokens(messages));
  CHECK(usage.at("completion_tokens").as_int64() >= 1);
  CHECK(s.server->idle());
}

TEST_CASE("a conversation takes tool results by id and keeps them in its history", "[net][tools]") {
  ToolServer s;
  auto messages = tool_history();
  const json::array first(messages.begin(), messages.begin() + 2);
  auto r1 = s.post(s.request(first, R"("conversation": "calc")"));
  REQUIRE(r1.status == 200);
  // The client answers a tool call with its result and a new question.
  const json::array second(messages.begin() + 3, messages.end());
  auto r2 = s.post(s.request(second, R"("conversation": "calc")"));
  REQUIRE(r2.status == 200);
  const json::value doc = json::parse(r2.body);
  const json::object& usage = doc.at("usage").as_object();
  // The first turn's prompt was not computed again.
  CHECK(usage.at("prompt_tokens_details").at("cached_tokens").as_int64() > 0);
  auto snapshot = boost::asio::co_spawn(s.server->io, s.server->engine->snapshot("", "calc"),
                                        boost::asio::use_future)
                      .get();
  REQUIRE(snapshot.has_value());
  REQUIRE(snapshot->messages.size() == 6);
  CHECK(snapshot->messages[3].role == "tool");
  CHECK(snapshot->messages[3].tool_call_id == "call_7");
  CHECK(snapshot->messages[3].content == "5");
}

TEST_CASE("what the server cannot honour is refused with a 400 naming the field", "[net][tools]") {
  ToolServer s;
  const json::array one = json::parse(R"([{"role": "user", "content": "hi"}])").as_array();
  struct Refused {
    std::string extra, param;
  };
  for (const Refused& c : std::vector<Refused>{
           {R"("response_format": {"type": "json_object"})", "response_format"},
           {R"("logit_bias": {"42": 5})", "logit_bias"},
           {R"("tool_choice": "required")", "tool_choice"},
           {R"("tool_choice": {"type": "function", "function": {"name": "add"}})", "tool_choice"},
       }) {
    INFO(c.extra);
    auto r = s.post(s.request(one, c.extra));
    CHECK(r.status == 400);
    CHECK(error_param(r) == c.param);
  }
  // What it can honour is accepted as a no-op.
  CHECK(s.post(s.request(one, R"("response_format": {"type": "text"}, "logit_bias": {})")).status == 200);
  CHECK(s.post(s.request(one, R"("tool_choice": "auto")")).status == 200);
  // A tool message must say which call it answers; tools must be functions.
  auto no_id = s.post(s.request(json::parse(R"([{"role": "tool", "content": "5"}])").as_array()));
  CHECK(no_id.status == 400);
  CHECK(error_param(no_id) == "messages[0].tool_call_id");
  const std::string bad_tools = R"({"model": ")" + s.server->engine->model_name() +
                                R"(", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "web"}]})";
  CHECK(error_param(s.post(bad_tools)) == "tools");
}

TEST_CASE("a built-in template refuses a request with tools with a 400", "[net][tools]") {
  testing::TestServer s(testing::stories_model(), [](actors::EngineOptions& o) { o.chat_template = "chatml"; });
  const std::string body =
      request_body(s.engine->model_name(), json::parse(R"([{"role": "user", "content": "hi"}])").as_array());
  auto r = testing::http_call(s.port(), http::verb::post, "/v1/chat/completions", body);
  CHECK(r.status == 400);
  CHECK_THAT(r.body, Catch::Contains("does not render tools"));
}
