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

  explicit Server(std::string admin_key) {
    net::AdminRouteOptions o;
    o.admin_key = std::move(admin_key);
    o.capture_trace = [this](std::chrono::seconds d) -> asio::awaitable<net::ApiResult<std::string>> {
      captured_seconds.push_back(int(d.count()));
      co_return std::string(R"({"traceEvents":[]})");
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
