// The `pensieve` binary on SIGTERM: it stops accepting at once, lets a
// streamed reply in flight finish (within --shutdown-grace-s), and exits 0.
#include "tests/temp_dir.hpp"
#include "tests/tools/pensieve_child.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

using pensieve::testing::PensieveChild;

TEST_CASE("SIGTERM lets a streamed reply finish, refuses new connections and exits 0", "[tools][shutdown]") {
  const auto binary = pensieve::testing::pensieve_binary();
  pensieve::testing::TempDir cache("pensieve-shutdown");
  PensieveChild server(binary, cache.path(),
               {"--port", "0", "--rpc-port", "0", "--threads", "1", "--kv-device-mb", "64", "--shutdown-grace-s", "30"});
  const auto port = server.http_port();

  asio::io_context io;
  tcp::socket stream(io);
  stream.connect({asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = R"({"model":"pensieve-builtin","messages":[{"role":"user","content":"Tell me a story"}],)"
               R"("max_tokens":1000,"ignore_eos":true,"temperature":0,"stream":true})";
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read_header(stream, buffer, parser);
  REQUIRE(parser.get().result_int() == 200);

  const auto signalled = Clock::now();
  REQUIRE(::kill(server.pid, SIGTERM) == 0);
  server.wait_for(std::regex("(stopping)"), std::chrono::seconds(30));
  // New connections are refused while the reply still streams.
  pensieve::testing::wait_refused(port, std::chrono::seconds(30));
  CHECK(server.running());
  boost::system::error_code ec;
  http::read(stream, buffer, parser, ec);
  CHECK_FALSE(ec);
  const std::string& body = parser.get().body();
  CHECK(body.find(R"("finish_reason":"length")") != std::string::npos);
  CHECK(body.ends_with("data: [DONE]\n\n"));
  CHECK(server.wait_exit(std::chrono::seconds(30)) == 0);
  CHECK(Clock::now() - signalled < std::chrono::seconds(30));
}
