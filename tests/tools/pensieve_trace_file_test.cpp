// `pensieve --trace FILE` appends spans to FILE while the server runs (every
// --trace-flush-ms), so the file holds a finished request before the server
// stops, and everything up to the stop afterwards.
#include "runtime/trace.hpp"
#include "runtime/trace_names.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tools/pensieve_child.hpp"

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace names = pensieve::rt::trace_names;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

std::size_t count_named(const std::vector<pensieve::rt::Span>& spans, std::string_view name) {
  return std::size_t(std::count_if(spans.begin(), spans.end(), [&](const auto& s) {
    return s.kind == pensieve::rt::SpanKind::request && s.name == name;
  }));
}

int chat(std::uint16_t port) {
  asio::io_context io;
  tcp::socket stream(io);
  stream.connect({asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = R"({"model":"pensieve-builtin","messages":[{"role":"user","content":"Hello"}],)"
               R"("max_tokens":4,"temperature":0})";
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  return res.result_int();
}

}  // namespace

TEST_CASE("pensieve --trace FILE holds a finished request while the server still runs, and all of it after SIGTERM",
          "[tools][trace]") {
  const auto binary = pensieve::testing::pensieve_binary();
  pensieve::testing::TempDir dir("pensieve-trace-file");
  const auto trace = (dir / "run.trace").string();
  pensieve::testing::PensieveChild server(binary, dir.path(),
                                          {"--port", "0", "--rpc-port", "0", "--threads", "1", "--kv-device-mb",
                                           "64", "--trace", trace, "--trace-flush-ms", "20"});
  const auto port = server.http_port();
  REQUIRE(chat(port) == 200);
  REQUIRE(chat(port) == 200);

  // The flushing thread runs on its own clock: wait for it, bounded.
  std::size_t done_midway = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (done_midway < 2) {
    REQUIRE(Clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // A read may meet a chunk half written: that read fails, a later one succeeds.
    if (auto file = pensieve::rt::read_trace_file(trace)) done_midway = count_named(file->spans, names::request_done);
  }
  REQUIRE(server.running());
  REQUIRE(done_midway == 2);

  REQUIRE(::kill(server.pid, SIGTERM) == 0);
  const auto written = std::stoull(server.wait_for(std::regex(R"(wrote (\d+) trace spans)"), std::chrono::seconds(60)));
  REQUIRE(server.wait_exit(std::chrono::seconds(60)) == 0);
  auto file = pensieve::rt::read_trace_file(trace);
  REQUIRE(file.has_value());
  REQUIRE(file->spans.size() == written);
  CHECK(count_named(file->spans, names::request_arrival) == 2);
  CHECK(count_named(file->spans, names::request_done) == 2);
  CHECK(file->header.dropped_spans == 0);
  CHECK(!file->header.thread_names.empty());
}
