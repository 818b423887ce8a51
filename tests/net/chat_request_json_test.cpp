#include "net/chat_request_json.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

using pensieve::net::parse_chat_request;
using pensieve::net::RequestLimits;

namespace {
const RequestLimits limits{};

pensieve::net::ApiError error_of(std::string_view body) {
  auto r = parse_chat_request(body, limits);
  REQUIRE_FALSE(r.has_value());
  return r.error();
}
}  // namespace

TEST_CASE("a complete chat request is parsed field by field", "[net]") {
  auto r = parse_chat_request(R"({"model":"m","messages":[{"role":"system","content":"be brief"},
    {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],
    "max_tokens":7,"temperature":0,"top_p":0.5,"seed":42,"stop":["a","b"],"logprobs":true,
    "top_logprobs":3,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,
    "min_tokens":2,"conversation":"c1"})",
                              limits);
  REQUIRE(r.has_value());
  CHECK(r->model == "m");
  REQUIRE(r->messages.size() == 2);
  CHECK(r->messages[1].content == "hi there");
  CHECK(r->max_tokens == 7);
  CHECK(r->temperature == 0.0f);
  CHECK(r->top_p == 0.5f);
  CHECK(r->seed == 42u);
  CHECK(r->stop == std::vector<std::string>{"a", "b"});
  CHECK(r->logprobs);
  CHECK(r->top_logprobs == 3);
  CHECK(r->stream);
  CHECK(r->include_usage);
  CHECK(r->ignore_eos);
  CHECK(r->min_tokens == 2);
  CHECK(r->conversation_id == "c1");
}

TEST_CASE("bad chat requests name the offending field", "[net]") {
  CHECK(error_of("{not json").message.find("not valid JSON") != std::string::npos);
  CHECK(error_of("[1]").message == "request body must be a JSON object");
  CHECK(error_of(R"({"messages":[]})").param == "model");
  CHECK(error_of(R"({"model":"m","messages":[]})").param == "messages");
  CHECK(error_of(R"({"model":"m","messages":[{"role":"robot","content":"x"}]})").param ==
        "messages[0].role");
  CHECK(error_of(R"({"model":"m","messages":[{"role":"user","content":5}]})").param ==
        "messages[0].content");
  CHECK(error_of(R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":"9"})")
            .param == "max_tokens");
  CHECK(error_of(R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0})")
            .param == "max_tokens");
  CHECK(error_of(R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3})")
            .param == "temperature");
  CHECK(error_of(R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":2})").param == "n");
  CHECK(error_of(R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":["","x"]})")
            .param == "stop");
  CHECK(error_of(R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_logprobs":2})")
            .param == "top_logprobs");
}

TEST_CASE("cache_salt is a non-empty string of at most 256 bytes, for chat and legacy completions", "[net]") {
  auto r = parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"cache_salt":"s-1"})",
                              limits);
  REQUIRE(r.has_value());
  CHECK(r->cache_salt == "s-1");
  auto none = parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"x"}]})", limits);
  REQUIRE(none.has_value());
  CHECK_FALSE(none->cache_salt.has_value());
  auto legacy = pensieve::net::parse_completion_request(R"({"model":"m","prompt":"x","cache_salt":"s-2"})", limits);
  REQUIRE(legacy.has_value());
  CHECK(legacy->cache_salt == "s-2");
  const auto bad = [](const std::string& salt) {
    return error_of(R"({"model":"m","messages":[{"role":"user","content":"x"}],"cache_salt":)" + salt + "}");
  };
  const auto wrong_type = bad("7");
  CHECK(wrong_type.param == "cache_salt");
  CHECK(wrong_type.message == "'cache_salt' must be a string of 1 to 256 bytes");
  CHECK(bad(R"("")").param == "cache_salt");
  CHECK(bad("[\"a\"]").param == "cache_salt");
  CHECK(bad('"' + std::string(257, 'a') + '"').param == "cache_salt");
  auto null_salt =
      parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"cache_salt":null})", limits);
  REQUIRE(null_salt.has_value());  // as absent
  CHECK_FALSE(null_salt->cache_salt.has_value());
}

TEST_CASE("an API error serialises as an OpenAI error body", "[net]") {
  auto body = boost::json::parse(error_of(R"({"model":1})").to_json());
  const auto& e = body.at("error").as_object();
  CHECK(e.at("type").as_string() == "invalid_request_error");
  CHECK(e.at("param").as_string() == "model");
  CHECK(e.at("code").is_null());
}

TEST_CASE("cache_control pins the prompt for its ttl: \"<n>s\", \"<n>m\", \"<n>h\" or seconds, 5 minutes by default",
          "[net]") {
  const auto ttl_of = [](const std::string& control) {
    auto r = parse_chat_request(
        R"({"model":"m","messages":[{"role":"user","content":"x"}],"cache_control":)" + control + "}", limits);
    REQUIRE(r.has_value());
    return r->pin_ttl_s;
  };
  CHECK(ttl_of(R"({"type":"ephemeral"})") == 300);
  CHECK(ttl_of(R"({"type":"ephemeral","ttl":"5m"})") == 300);
  CHECK(ttl_of(R"({"type":"ephemeral","ttl":"1h"})") == 3600);
  CHECK(ttl_of(R"({"type":"ephemeral","ttl":"45s"})") == 45);
  CHECK(ttl_of(R"({"type":"ephemeral","ttl":90})") == 90);
  auto none = parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"x"}]})", limits);
  REQUIRE(none.has_value());
  CHECK(none->pin_ttl_s == 0);
  auto legacy = pensieve::net::parse_completion_request(
      R"({"model":"m","prompt":"x","cache_control":{"type":"ephemeral","ttl":"2m"}})", limits);
  REQUIRE(legacy.has_value());
  CHECK(legacy->pin_ttl_s == 120);
  const auto bad = [](const std::string& control) {
    return error_of(R"({"model":"m","messages":[{"role":"user","content":"x"}],"cache_control":)" + control + "}");
  };
  for (const char* control : {R"("ephemeral")", R"({})", R"({"type":"persistent"})",
                              R"({"type":"ephemeral","ttl":0})", R"({"type":"ephemeral","ttl":-5})",
                              R"({"type":"ephemeral","ttl":"5d"})", R"({"type":"ephemeral","ttl":"m"})",
                              R"({"type":"ephemeral","ttl":"25h"})", R"({"type":"ephemeral","ttl":86401})",
                              R"({"type":"ephemeral","ttl":1.5})", R"({"type":"ephemeral","size":1})"}) {
    INFO(control);
    const auto e = bad(control);
    CHECK(e.status == 400);
    CHECK(e.param == "cache_control");
  }
}
