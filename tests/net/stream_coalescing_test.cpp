// The front end's coalescing: a turn's deltas queued behind the one awaited
// are taken without suspending (TurnStream::try_next) and go out in one
// socket write (one SSE chunk holding one `data:` event per delta); a chunk
// the socket cannot take at once is finished by the async write.
#include "actors/turn_stream.hpp"
#include "net/chat_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

using namespace pensieve;
namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;

namespace {

actors::TurnEvent delta_event(std::string text) {
  actors::TurnDelta d;
  d.text = std::move(text);
  return d;
}

actors::TurnEvent done_event(std::int32_t completion_tokens) {
  actors::TurnDone done;
  done.completion_tokens = completion_tokens;
  return done;
}

// Sends the deltas it is given as batches: {"a","b","c"} in one sink call,
// then {"d"}; or, with big_deltas > 0, that many deltas of delta_bytes each,
// one per call.
class BatchingBackend final : public net::ChatBackend {
 public:
  BatchingBackend(int big_deltas = 0, std::size_t delta_bytes = 0)
      : big_deltas_(big_deltas), delta_bytes_(delta_bytes) {}
  std::string model_name() const override { return "fake"; }

  asio::awaitable<net::ApiResult<net::GenerationResult>> generate(const net::ChatRequest&,
                                                                  net::DeltaSink sink) override {
    net::GenerationResult result;
    result.finish_reason = "length";
    if (big_deltas_ > 0) {
      for (int i = 0; i < big_deltas_; ++i) {
        const net::GenerationDelta d{std::string(delta_bytes_, char('a' + i % 26)), {}};
        const bool open = co_await sink(d);
        if (!open) co_return result;
      }
      co_return result;
    }
    const std::vector<net::GenerationDelta> three{{"a", {}}, {"b", {}}, {"c", {}}};
    const net::DeltaSink::Batch batch(three);
    const bool open = co_await sink(batch);
    if (!open) co_return result;
    const net::GenerationDelta last{"d", {}};
    co_await sink(last);
    co_return result;
  }

 private:
  int big_deltas_;
  std::size_t delta_bytes_;
};

struct RunningServer {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  net::HttpServer server;
  std::thread thread;
  explicit RunningServer(net::ChatBackend& backend)
      : server(io.get_executor(), net::make_openai_routes(backend, {}), net::HttpServerOptions{}) {
    REQUIRE(server.listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~RunningServer() {
    asio::co_spawn(io, server.stop(), asio::use_future).get();
    io.stop();
    thread.join();
  }
};

// A streamed chat completion read chunk by chunk: each HTTP chunk's body.
std::vector<std::string> streamed_chunks(std::uint16_t port) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = R"({"model":"fake","stream":true,"messages":[{"role":"user","content":"hi"}]})";
  req.prepare_payload();
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response_parser<http::empty_body> parser;
  parser.body_limit(256 << 20);
  std::vector<std::string> chunks;
  auto on_header = [&chunks](std::uint64_t size, std::string_view, boost::beast::error_code&) {
    if (size > 0) chunks.emplace_back();  // the last chunk (size 0) has no body
  };
  auto on_body = [&chunks](std::uint64_t, std::string_view body,
                           boost::beast::error_code&) -> std::size_t {
    chunks.back() += body;
    return body.size();
  };
  parser.on_chunk_header(on_header);
  parser.on_chunk_body(on_body);
  http::read(socket, buffer, parser);
  return chunks;
}

// The `content` of every `data:` event of an SSE text, "[DONE]" as itself.
std::vector<std::string> event_contents(const std::string& sse) {
  std::vector<std::string> out;
  for (std::size_t at = sse.find("data: "); at != std::string::npos; at = sse.find("data: ", at)) {
    const std::size_t end = sse.find("\n\n", at);
    const std::string payload = sse.substr(at + 6, end - at - 6);
    at = end;
    if (payload == "[DONE]") {
      out.push_back(payload);
      continue;
    }
    const json::value v = json::parse(payload);
    const json::object& delta = v.at("choices").at(0).at("delta").as_object();
    out.push_back(delta.contains("content") ? std::string(delta.at("content").as_string())
                                            : std::string("<none>"));
  }
  return out;
}

}  // namespace

TEST_CASE("try_next takes the deltas already queued without suspending, then the turn's end",
          "[net][coalesce]") {
  asio::io_context io;
  auto channel = std::make_shared<actors::TurnEventChannel>(io.get_executor(), 8);
  actors::TurnStream stream(channel, {}, actors::TurnId{1});  // no engine: nothing to cancel
  CHECK_FALSE(stream.try_next().has_value());  // nothing queued yet
  CHECK_FALSE(stream.ended());
  for (const char* t : {"one", "two", "three"})
    REQUIRE(channel->try_send(boost::system::error_code{}, delta_event(t)));
  REQUIRE(channel->try_send(boost::system::error_code{}, done_event(3)));

  std::vector<std::string> awaited, taken;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto first = co_await stream.next();
        if (first) awaited.push_back(first->text);
        for (auto more = stream.try_next(); more; more = stream.try_next())
          taken.push_back(more->text);
        auto after = co_await stream.next();  // the end was taken by try_next
        if (after) awaited.push_back(after->text);
      },
      asio::detached);
  io.run();
  CHECK(awaited == std::vector<std::string>{"one"});
  CHECK(taken == std::vector<std::string>{"two", "three"});
  CHECK(stream.ended());
  REQUIRE(stream.result().has_value());
  CHECK(stream.result()->completion_tokens == 3);
}

TEST_CASE("deltas handed over together go out as one SSE chunk with one event each",
          "[net][coalesce]") {
  BatchingBackend backend;
  RunningServer s(backend);
  const std::vector<std::string> chunks = streamed_chunks(s.server.port());
  // The role chunk, {a, b, c} in one chunk, {d}, the finish chunk, [DONE].
  REQUIRE(chunks.size() == 5);
  CHECK(event_contents(chunks[0]) == std::vector<std::string>{""});
  CHECK(event_contents(chunks[1]) == std::vector<std::string>{"a", "b", "c"});
  CHECK(event_contents(chunks[2]) == std::vector<std::string>{"d"});
  CHECK(event_contents(chunks[3]) == std::vector<std::string>{"<none>"});
  CHECK(event_contents(chunks[4]) == std::vector<std::string>{"[DONE]"});
}

TEST_CASE("a stream larger than the socket buffers arrives whole and in order", "[net][coalesce]") {
  // 24 MiB: more than loopback's send and receive buffers hold, so some
  // chunks are only partly taken by the first send and finished asynchronously.
  constexpr int deltas = 96;
  constexpr std::size_t bytes = 256 << 10;
  BatchingBackend backend(deltas, bytes);
  RunningServer s(backend);
  const std::vector<std::string> chunks = streamed_chunks(s.server.port());
  std::string all;
  for (const auto& c : chunks) all += c;
  const std::vector<std::string> contents = event_contents(all);
  REQUIRE(contents.size() == std::size_t(1 + deltas + 2));  // role, deltas, finish, [DONE]
  for (int i = 0; i < deltas; ++i) {
    const std::string& c = contents[std::size_t(1 + i)];
    CHECK(c.size() == bytes);
    CHECK(c.find_first_not_of(char('a' + i % 26)) == std::string::npos);
  }
  CHECK(contents.back() == "[DONE]");
}
