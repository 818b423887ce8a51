// An actor given a Tracer records one span per handled message.
#include "runtime/actor.hpp"
#include "runtime/trace.hpp"
#include "tests/runtime/actor_test_support.hpp"

#include <catch2/catch.hpp>

#include <string_view>
#include <variant>

namespace {

namespace asio = boost::asio;
namespace rt = pensieve::rt;

struct Add {
  int n = 0;
};
struct Get {
  rt::Reply<int> reply;
};
using CounterMsg = std::variant<Add, Get>;

struct Counter {
  int total = 0;
  void operator()(Add m) { total += m.n; }
  void operator()(Get m) { m.reply.send(total); }
};

// Names its messages instead of the default "msg#<index>".
struct NamedCounter : Counter {
  std::string_view message_name(const CounterMsg& m) const {
    return std::holds_alternative<Add>(m) ? "add" : "get";
  }
};

template <class Handler>
int run_counter(rt::Tracer* tracer, Handler handler) {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  int total = 0;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    auto counter = rt::spawn_actor<CounterMsg>(group, ctx.get_executor(), std::move(handler),
                                               {.name = "counter", .tracer = tracer});
    co_await counter.tell(Add{2});
    co_await counter.tell(Add{3});
    Get get;  // named: see "GCC 12" in runtime/actor.hpp
    auto answer = co_await counter.ask(std::move(get));
    total = answer.value();
    co_await group.stop();
  });
  return total;
}

}  // namespace

TEST_CASE("an actor with an enabled tracer records one span per handled message") {
  rt::Tracer tracer;
  tracer.enable();
  CHECK(run_counter(&tracer, Counter{}) == 5);
  auto spans = tracer.drain();
  REQUIRE(spans.size() == 3);
  const char* names[] = {"msg#0", "msg#0", "msg#1"};
  for (std::size_t i = 0; i < spans.size(); ++i) {
    CHECK(spans[i].kind == rt::SpanKind::message);
    CHECK(spans[i].actor == "counter");
    CHECK(spans[i].name == names[i]);
    CHECK(spans[i].start_ns <= spans[i].end_ns);
    if (i > 0) CHECK(spans[i - 1].end_ns <= spans[i].start_ns);
  }
}

TEST_CASE("an actor's handler can name its messages in spans") {
  rt::Tracer tracer;
  tracer.enable();
  CHECK(run_counter(&tracer, NamedCounter{}) == 5);
  auto spans = tracer.drain();
  REQUIRE(spans.size() == 3);
  CHECK(spans[0].name == "add");
  CHECK(spans[2].name == "get");
}

TEST_CASE("an actor records nothing with a disabled tracer or without one") {
  rt::Tracer tracer;
  CHECK(run_counter(&tracer, Counter{}) == 5);
  CHECK(tracer.drain().empty());
  CHECK(run_counter(nullptr, Counter{}) == 5);
}
