// POST /admin/trace in front of other routes: who may call it, which
// seconds it accepts, and what it answers (with a stand-in recording).
#include "net/admin_routes.hpp"
#include "net/http_server.hpp"
#include "tests/net/http_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <thread>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using namespace pensieve;
using pensieve::testing::http_call;

namespace {

struct Server {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<net::HttpServer> http;
  std::thread thread;
  std::vector<int> captured_seconds;  // on the io thread; read after it answered
  std::vector<net::ChatRequest> pins;  // likewise
  std::vector<net::UnpinScope> unpins;  // likewise

  explicit Server(std::string admin_key) {
    net::AdminRouteOptions o;
    o.admin_key = std::move(admin_key);
    o.capture_trace = [this](std::chrono::seconds d) -> asio::awaitable<net::ApiResult<std::string>> {
      captured_seconds.push_back(int(d.count()));
      co_return std::string(R"({"traceEvents":[]})");
    };
    o.pin_prefix = [this](net::ChatRequest r) -> asio::awaitable<net::ApiResult<net::GenerationResult>> {
      pins.push_back(r);
      if (r.cache_salt == "full") {
        co_return net::bad_request("pinning would take the pinned KV blocks past the server's cap", "cache_control");
      }
      net::GenerationResult g;
      g.prompt_tokens = 40;
      g.cached_tokens = 32;
      co_return g;
    };
    o.unpin_prefixes = [this](std::optional<std::string> tenant,
                              std::optional<std::string> salt) -> asio::awaitable<std::int64_t> {
      unpins.push_back({tenant, salt});
      co_return tenant ? 3 : 7;
    };
    auto next = [](const net::HttpRequest&, net::ResponseWriter& w) -> asio::awaitable<void> {
      co_await w.send(200, "text/plain", "next");
    };
    http = std::make_unique<net::HttpServer>(io.get_executor(), net::with_admin_routes(next, std::move(o)),
                                             net::HttpServerOptions{});
    REQUIRE(http->listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~Server() {
    asio::co_spawn(io, http->stop(), asio::use_future).get();
    io.stop();
    thread.join();
  }
  testing::HttpReply trace(const std::string& query, const std::string& auth,
                           http::verb method = http::verb::post) {
    return http_call(http->port(), method, "/admin/trace" + query, {}, auth);
  }
};

std::string error_code(const testing::HttpReply& r) {
  return std::string(json::parse(r.body).at("error").at("code").as_string());
}

}  // namespace

TEST_CASE("without an admin key the admin routes do not exist", "[net][admin]") {
  Server s("");
  auto r = s.trace("?seconds=1", "Bearer anything");
  CHECK(r.status == 200);
  CHECK(r.body == "next");  // passed on to the next handler, which would answer 404
  CHECK(s.captured_seconds.empty());
}

TEST_CASE("a missing or wrong admin key is a 401 with an OpenAI error body", "[net][admin]") {
  Server s("sekrit");
  auto missing = s.trace("?seconds=1", "");
  CHECK(missing.status == 401);
  CHECK(error_code(missing) == "invalid_api_key");
  CHECK(json::parse(missing.body).at("error").at("type").as_string() == "invalid_request_error");
  CHECK(s.trace("?seconds=1", "Bearer sekri").status == 401);
  CHECK(s.trace("?seconds=1", "Bearer sekrit2").status == 401);
  CHECK(s.trace("?seconds=1", "sekrit").status == 401);
  CHECK(s.captured_seconds.empty());
  // Other routes are not the admin's.
  CHECK(http_call(s.http->port(), http::verb::get, "/v1/models").body == "next");
}

TEST_CASE("seconds outside 1..60 or not an integer is a 400 naming the param", "[net][admin]") {
  Server s("sekrit");
  for (const char* q : {"", "?seconds=0", "?seconds=61", "?seconds=-1", "?seconds=abc", "?seconds=1.5", "?seconds="}) {
    INFO(q);
    auto r = s.trace(q, "Bearer sekrit");
    CHECK(r.status == 400);
    CHECK(json::parse(r.body).at("error").at("param").as_string() == "seconds");
  }
  CHECK(s.captured_seconds.empty());
  CHECK(s.trace("?seconds=1", "Bearer sekrit", http::verb::get).status == 405);
}

TEST_CASE("the admin key and valid seconds record for that long and answer the trace JSON", "[net][admin]") {
  Server s("sekrit");
  auto r = s.trace("?x=1&seconds=60", "Bearer sekrit");
  REQUIRE(r.status == 200);
  CHECK(r.content_type == "application/json");
  CHECK(json::parse(r.body).at("traceEvents").as_array().empty());
  auto one = s.trace("?seconds=1", "Bearer sekrit");
  REQUIRE(one.status == 200);
  CHECK(s.captured_seconds == std::vector<int>{60, 1});
}

TEST_CASE("POST /admin/prefix-cache/pin runs the prompt as a one-token pinned request and says what it cached",
          "[net][admin]") {
  Server s("sekrit");
  const auto pin = [&](const std::string& body, const std::string& auth = "Bearer sekrit") {
    return http_call(s.http->port(), http::verb::post, "/admin/prefix-cache/pin", body, auth);
  };
  auto ok = pin(R"({"messages":[{"role":"system","content":"Be brief."}],"ttl_s":600,"tenant":"acme",)"
                R"("cache_salt":"x"})");
  REQUIRE(ok.status == 200);
  const auto body = json::parse(ok.body);
  CHECK(body.at("pinned").as_bool());
  CHECK(body.at("prompt_tokens").as_int64() == 40);
  CHECK(body.at("cached_tokens").as_int64() == 32);
  CHECK(body.at("ttl_s").as_int64() == 600);
  REQUIRE(s.pins.size() == 1);
  CHECK(s.pins[0].tenant == "acme");
  CHECK(s.pins[0].cache_salt == "x");
  CHECK(s.pins[0].pin_ttl_s == 600);
  CHECK(s.pins[0].max_tokens == 1);
  CHECK(s.pins[0].messages.size() == 1);
  auto text = pin(R"({"prompt":"Once upon a time","ttl_s":5})");
  REQUIRE(text.status == 200);
  REQUIRE(s.pins.size() == 2);
  CHECK(s.pins[1].prompt == "Once upon a time");
  CHECK(s.pins[1].tenant.empty());  // that of requests without API keys
  auto ids = pin(R"({"prompt":[1,15,27,300],"ttl_s":5})");
  REQUIRE(ids.status == 200);
  REQUIRE(s.pins.size() == 3);
  CHECK(s.pins[2].prompt_tokens == std::vector<std::int32_t>{1, 15, 27, 300});
  CHECK(!s.pins[2].prompt);
  // Past the cap: the backend's 400 goes out as it is.
  auto full = pin(R"({"prompt":"x","ttl_s":5,"cache_salt":"full"})");
  CHECK(full.status == 400);
  CHECK(json::parse(full.body).at("error").at("param").as_string() == "cache_control");
  CHECK(pin(R"({"prompt":"x","ttl_s":5})", "Bearer wrong").status == 401);
  CHECK(http_call(s.http->port(), http::verb::get, "/admin/prefix-cache/pin", {}, "Bearer sekrit").status == 405);
}

TEST_CASE("bad /admin/prefix-cache/pin bodies are 400s naming the field, and nothing is pinned", "[net][admin]") {
  Server s("sekrit");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", ""},
      {R"([1])", ""},
      {R"({"prompt":"x"})", "ttl_s"},
      {R"({"prompt":"x","ttl_s":0})", "ttl_s"},
      {R"({"prompt":"x","ttl_s":86401})", "ttl_s"},
      {R"({"prompt":"x","ttl_s":"5m"})", "ttl_s"},
      {R"({"ttl_s":5})", "messages"},
      {R"({"prompt":"x","messages":[{"role":"user","content":"x"}],"ttl_s":5})", "messages"},
      {R"({"prompt":7,"ttl_s":5})", "prompt"},
      {R"({"prompt":[],"ttl_s":5})", "prompt"},
      {R"({"prompt":[1,-1],"ttl_s":5})", "prompt"},
      {R"({"messages":[],"ttl_s":5})", "messages"},
      {R"({"messages":[{"role":"robot","content":"x"}],"ttl_s":5})", "messages[0].role"},
      {R"({"prompt":"x","ttl_s":5,"tenant":3})", "tenant"},
      {R"({"prompt":"x","ttl_s":5,"cache_salt":""})", "cache_salt"},
      {R"({"prompt":"x","ttl_s":5,"conversation":"c"})", "conversation"},
      {R"({"prompt":"x","ttl_s":5,"stream":true})", "stream"},
  };
  for (const auto& [body, param] : cases) {
    INFO(body);
    auto r = http_call(s.http->port(), http::verb::post, "/admin/prefix-cache/pin", body, "Bearer sekrit");
    CHECK(r.status == 400);
    const auto e = json::parse(r.body).at("error").as_object();
    CHECK(e.at("type").as_string() == "invalid_request_error");
    if (!param.empty()) CHECK(e.at("param").as_string() == param);
  }
  CHECK(s.pins.empty());
}

TEST_CASE("POST /admin/prefix-cache/unpin drops one namespace's pins or every pin and says how many blocks",
          "[net][admin]") {
  Server s("sekrit");
  const auto unpin = [&](const std::string& body, const std::string& auth = "Bearer sekrit") {
    return http_call(s.http->port(), http::verb::post, "/admin/prefix-cache/unpin", body, auth);
  };
  auto one = unpin(R"({"tenant":"acme","cache_salt":"x"})");
  REQUIRE(one.status == 200);
  CHECK(json::parse(one.body).at("unpinned_blocks").as_int64() == 3);
  auto plain = unpin("");  // requests without API keys and salt
  REQUIRE(plain.status == 200);
  auto all = unpin(R"({"all":true})");
  REQUIRE(all.status == 200);
  CHECK(json::parse(all.body).at("unpinned_blocks").as_int64() == 7);
  REQUIRE(s.unpins.size() == 3);
  CHECK(s.unpins[0].tenant == "acme");
  CHECK(s.unpins[0].cache_salt == "x");
  CHECK(s.unpins[1].tenant == "");
  CHECK(!s.unpins[1].cache_salt);
  CHECK(!s.unpins[2].tenant);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"not json", ""},
      {R"([1])", ""},
      {R"({"all":"yes"})", "all"},
      {R"({"all":true,"tenant":"acme"})", "all"},
      {R"({"tenant":3})", "tenant"},
      {R"({"cache_salt":""})", "cache_salt"},
      {R"({"prompt":"x"})", "prompt"},
  };
  for (const auto& [body, param] : bad) {
    INFO(body);
    auto r = unpin(body);
    CHECK(r.status == 400);
    const auto e = json::parse(r.body).at("error").as_object();
    CHECK(e.at("type").as_string() == "invalid_request_error");
    if (!param.empty()) CHECK(e.at("param").as_string() == param);
  }
  CHECK(s.unpins.size() == 3);
  CHECK(unpin(R"({"all":true})", "Bearer wrong").status == 401);
  CHECK(http_call(s.http->port(), http::verb::get, "/admin/prefix-cache/unpin", {}, "Bearer sekrit").status == 405);
}
