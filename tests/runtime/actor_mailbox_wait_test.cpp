// An actor's message spans say when each message was sent, so a trace shows
// how long messages waited in the mailbox; the mailbox stamps only while its
// tracer is enabled.
#include "runtime/actor.hpp"
#include "runtime/trace.hpp"
#include "tests/runtime/actor_test_support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <variant>

namespace {

namespace asio = boost::asio;
namespace rt = pensieve::rt;

struct Work {
  std::uint64_t request = 0;
};
struct Done {
  rt::Reply<int> reply;
};
using WorkMsg = std::variant<Work, Done>;

struct Worker {
  int handled = 0;
  void operator()(Work) { ++handled; }
  void operator()(Done m) { m.reply.send(handled); }
  std::uint64_t message_flow_id(const WorkMsg& m) const {
    return std::holds_alternative<Work>(m) ? std::get<Work>(m).request : 0;
  }
};

}  // namespace

TEST_CASE("a mailbox stamps send times only while its tracer is enabled") {
  asio::io_context ctx{1};
  rt::Tracer tracer;
  rt::Mailbox<int> untraced(ctx.get_executor(), 4);
  rt::Mailbox<int> traced(ctx.get_executor(), 4, &tracer);

  REQUIRE(untraced.try_send(1) == rt::SendStatus::sent);
  REQUIRE(traced.try_send(2) == rt::SendStatus::sent);  // tracer still disabled
  tracer.enable();
  const std::uint64_t before = rt::cpu_ticks();
  REQUIRE(traced.try_send(3) == rt::SendStatus::sent);
  const std::uint64_t after = rt::cpu_ticks();

  auto one = untraced.try_receive_delivery();
  REQUIRE(one);
  CHECK(one->msg == 1);
  CHECK(one->sent_ticks == 0);
  auto two = traced.try_receive_delivery();
  REQUIRE(two);
  CHECK(two->msg == 2);
  CHECK(two->sent_ticks == 0);
  auto three = traced.try_receive_delivery();
  REQUIRE(three);
  CHECK(three->msg == 3);
  CHECK(before <= three->sent_ticks);
  CHECK(three->sent_ticks <= after);
}

TEST_CASE("a refused try_send leaves the message with its sender") {
  asio::io_context ctx{1};
  rt::Tracer tracer;
  tracer.enable();
  rt::Mailbox<std::vector<int>> box(ctx.get_executor(), 1, &tracer);
  std::vector<int> first{1};
  std::vector<int> second{2, 3};
  REQUIRE(box.try_send(first) == rt::SendStatus::sent);
  REQUIRE(box.try_send(second) == rt::SendStatus::full);
  CHECK(second == std::vector<int>{2, 3});
  box.close();
  REQUIRE(box.try_send(second) == rt::SendStatus::closed);
  CHECK(second == std::vector<int>{2, 3});
  CHECK(box.try_receive() == std::vector<int>{1});
}

TEST_CASE("an actor's message spans carry each message's send time and request") {
  rt::Tracer tracer;
  tracer.enable();
  asio::io_context ctx{1};
  rt::TaskGroup group;
  int handled = 0;
  const std::int64_t before_ns = rt::steady_now_ns();
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    auto worker = rt::spawn_actor<WorkMsg>(group, ctx.get_executor(), Worker{},
                                           {.name = "gpu worker", .tracer = &tracer});
    co_await worker.tell(Work{11});
    co_await worker.tell(Work{12});
    Done done;  // named: see "GCC 12" in runtime/actor.hpp
    auto answer = co_await worker.ask(std::move(done));
    handled = answer.value();
    co_await group.stop();
  });
  CHECK(handled == 2);
  const auto spans = tracer.drain();
  REQUIRE(spans.size() == 3);
  const std::uint64_t flows[] = {11, 12, 0};
  for (std::size_t i = 0; i < spans.size(); ++i) {
    CHECK(spans[i].actor == "gpu worker");
    CHECK(spans[i].flow_id == flows[i]);
    CHECK(before_ns <= spans[i].enqueue_ns);
    CHECK(spans[i].enqueue_ns <= spans[i].start_ns);
  }
  // Sent in order, so stamped in order.
  CHECK(spans[0].enqueue_ns <= spans[1].enqueue_ns);
  CHECK(spans[1].enqueue_ns <= spans[2].enqueue_ns);
}
