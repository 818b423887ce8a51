// A disconnect storm: streaming chat requests over loopback, each cut at a
// random point (mid-request, before the first byte, mid-prefill, mid-decode)
// by a client that resets its connection. Afterwards the server serves as
// before and nothing is left: no connection, turn, KV block, conversation
// actor or engine coroutine beyond what it started with, and resident
// memory within kRssMarginBytes of where it was. PENSIEVE_STORM_REQUESTS
// sets the count (default 500; bench/disconnect-storm.sh runs 10,000).
#include "tests/net/http_client.hpp"
#include "tests/net/server_fixture.hpp"
#include "tests/tiny_model.hpp"
#include "tests/under_sanitizer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

using namespace pensieve;
namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using asio::ip::tcp;

namespace {

constexpr std::int64_t kRssMarginBytes = std::int64_t{16} << 20;
// ASan keeps freed memory in its quarantine (256 MiB by default); its and
// TSan's shadow grow with every page touched, so RSS says nothing of a leak:
// LeakSanitizer and the test's counts of blocks, tasks and connections are
// the checks under it.
constexpr bool kRssMeaningful = !testing::under_sanitizer;
constexpr int kClients = 32;
constexpr int kConversations = 40;  // a quarter of the requests are turns of these
constexpr int kMaxTokens = 48;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

enum class Cut : std::uint8_t { mid_request, before_first_byte, mid_prefill, mid_decode, never };
constexpr std::array<const char*, 5> kCutNames{"mid-request", "before the first byte", "mid-prefill", "mid-decode",
                                               "not cut"};

std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * std::int64_t(::sysconf(_SC_PAGESIZE));
}

std::string request_bytes(int i) {
  // A long prompt, so that a cut soon after the request lands during prefill.
  std::string prompt = "Request " + std::to_string(i) + ":";
  for (int w = 0; w < 16; ++w) prompt += " word" + std::to_string((i + w) % 17);
  json::object body{{"model", "tiny"},
                    {"messages", json::array{json::object{{"role", "user"}, {"content", prompt}}}},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"stream", true},
                    {"max_tokens", kMaxTokens}};
  if (i % 4 == 0) body["conversation"] = "storm-" + std::to_string(i % kConversations);
  const std::string text = json::serialize(body);
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(text.size()) + "\r\n\r\n" + text;
}

struct Tally {
  std::array<int, 5> cuts{};
  int finished_first = 0;  // the whole reply came before the planned cut
  int not_ok = 0;          // answered with an error status
  std::string first_error;
};

// One request, cut as `cut` says; the socket is reset (SO_LINGER 0), as a
// crashed or killed client leaves it.
asio::awaitable<void> one_request(std::uint16_t port, int i, Cut cut, int decode_events, Tally& tally) {
  auto ex = co_await asio::this_coro::executor;
  tcp::socket socket(ex);
  auto [ce] = co_await socket.async_connect({asio::ip::make_address("127.0.0.1"), port}, tuple_awaitable);
  REQUIRE_FALSE(ce);
  const std::string bytes = request_bytes(i);
  const std::size_t send = cut == Cut::mid_request ? bytes.size() / 2 : bytes.size();
  auto [we, written] = co_await asio::async_write(socket, asio::buffer(bytes.data(), send), tuple_awaitable);
  REQUIRE_FALSE(we);
  std::string got;
  std::array<char, 4096> chunk{};
  const auto events = [&] {
    std::size_t n = 0;
    for (auto at = got.find("data: "); at != std::string::npos; at = got.find("data: ", at + 1)) ++n;
    return int(n);
  };
  if (cut == Cut::mid_prefill || cut == Cut::mid_decode || cut == Cut::never) {
    for (;;) {
      auto [re, n] = co_await socket.async_read_some(asio::buffer(chunk), tuple_awaitable);
      if (re) break;
      got.append(chunk.data(), n);
      if (got.size() >= 12 && !got.starts_with("HTTP/1.1 200")) {
        ++tally.not_ok;
        if (tally.first_error.empty()) tally.first_error = got;
        break;
      }
      if (got.find("data: [DONE]") != std::string::npos) {
        if (cut != Cut::never) ++tally.finished_first;
        break;
      }
      if (cut == Cut::mid_prefill && !got.empty()) break;  // the headers: the turn was admitted
      if (cut == Cut::mid_decode && events() >= decode_events) break;
    }
  }
  ++tally.cuts[std::size_t(cut)];
  boost::system::error_code ignored;
  socket.set_option(asio::socket_base::linger(true, 0), ignored);
  socket.close(ignored);
}

asio::awaitable<void> storm_client(std::uint16_t port, int first, int count, int stride, std::uint32_t seed,
                                   Tally& tally) {
  std::mt19937 rng(seed);
  for (int i = first; i < count; i += stride) {
    const Cut cut = Cut(rng() % 4);
    co_await one_request(port, i, cut, 1 + int(rng() % (kMaxTokens - 2)), tally);
  }
}

Tally run_storm(std::uint16_t port, int count) {
  asio::io_context io;
  Tally tally;
  for (int c = 0; c < kClients; ++c) {
    asio::co_spawn(io, storm_client(port, c, count, kClients, 1000u + std::uint32_t(c), tally),
                   [](std::exception_ptr e) {
                     if (e) std::rethrow_exception(e);
                   });
  }
  io.run();
  return tally;
}

// Whole, uncut replies (warms the allocator before the baseline).
void complete_requests(std::uint16_t port, int count) {
  asio::io_context io;
  Tally tally;
  for (int i = 0; i < count; ++i) {
    asio::co_spawn(io, one_request(port, 100001 + 2 * i, Cut::never, 0, tally), asio::detached);  // stateless
  }
  io.run();
}

}  // namespace

TEST_CASE("a storm of streaming requests cut at random points leaves nothing behind", "[net][disconnect][storm]") {
  const char* env = std::getenv("PENSIEVE_STORM_REQUESTS");
  const int count = env ? std::atoi(env) : 500;
  testing::TestServer s(testing::tiny_model(), [](actors::EngineOptions& o) {
    o.kv_cache_mb = 8;
    o.kv_host_mb = 0;
    o.scheduler.max_running = 64;
  });
  // The engine's own coroutines (its actors), before any conversation.
  const std::size_t tasks_before = s.engine->running_tasks();
  complete_requests(s.port(), 64);
  REQUIRE(s.idle());
  const std::int64_t rss_before = resident_bytes();

  const auto start = std::chrono::steady_clock::now();
  const Tally tally = run_storm(s.port(), count);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int total = 0;
  for (int n : tally.cuts) total += n;
  CHECK(total == count);
  INFO("first error: " << tally.first_error);
  CHECK(tally.not_ok == 0);
  REQUIRE(s.idle());  // no turn running or waiting, no connection open

  // The server still answers in full.
  const auto after = testing::http_call(
      s.port(), http::verb::post, "/v1/chat/completions",
      R"({"model":"tiny","messages":[{"role":"user","content":"still there?"}],"max_tokens":4,"ignore_eos":true})");
  CHECK(after.status == 200);

  // Conversations the storm made: deleted, their actors end; the stateless
  // turns' cached KV: cleared. Then every block is free and every coroutine
  // the storm started has ended.
  const auto conversations = s.engine->list_conversations("");
  CHECK(conversations.size() <= std::size_t(kConversations));
  for (const auto& c : conversations) CHECK(s.engine->delete_conversation("", c.id));
  s.engine->clear_prefix_cache();
  CHECK(s.engine->conversation_counts().live == 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s.engine->running_tasks() > tasks_before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(s.engine->running_tasks() == tasks_before);
  const auto stats = s.stats();
  CHECK(stats.free_blocks == stats.num_blocks);
  CHECK(stats.cached_conversations == 0);
  CHECK(s.open_connections() == 0);
  const std::int64_t rss_after = resident_bytes();
  std::printf("disconnect storm: %d requests in %.1f s (%s %d, %s %d, %s %d, %s %d; %d finished before their cut, %d "
              "error statuses), resident %+.1f MiB\n",
              count, seconds, kCutNames[0], tally.cuts[0], kCutNames[1], tally.cuts[1], kCutNames[2], tally.cuts[2],
              kCutNames[3], tally.cuts[3], tally.finished_first, tally.not_ok, double(rss_after - rss_before) / (1 << 20));
  if (kRssMeaningful) {
    CHECK(rss_after - rss_before <= kRssMarginBytes);
  } else {
    WARN("resident memory not checked under a sanitizer (shadow and quarantine)");
  }
}
