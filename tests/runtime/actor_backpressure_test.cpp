// Back-pressure: an actor's full mailbox makes its senders wait; it never
// holds more than its capacity.
#include "runtime/actor.hpp"
#include "runtime/executor.hpp"
#include "tests/runtime/actor_test_support.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <variant>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace rt = pensieve::rt;

struct Block {};
struct Item {
  int value = 0;
};
using SinkMsg = std::variant<Block, Item>;

struct Sink {
  rt::test::Gate* gate;
  std::vector<int>* received;
  asio::awaitable<void> operator()(SinkMsg msg) {
    if (std::holds_alternative<Block>(msg)) {
      co_await gate->pass();
    } else {
      received->push_back(std::get<Item>(msg).value);
    }
  }
};

}  // namespace

TEST_CASE("a full mailbox makes the sender wait until the actor takes a message") {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  rt::test::Gate gate(ctx.get_executor());
  std::vector<int> received;
  auto sink = rt::spawn_actor<SinkMsg>(group, ctx.get_executor(), Sink{&gate, &received},
                                       {.name = "sink", .mailbox_capacity = 2});
  REQUIRE(sink.try_tell(Block{}) == rt::SendStatus::sent);
  ctx.poll();  // the sink holds Block and waits at the gate; its mailbox is empty

  int completed = 0;
  rt::test::Outcome sender;
  rt::test::spawn_body(ctx, sender, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 5; ++i) {
      // Never co_await inside a Catch2 macro: GCC 12 mis-compiles it.
      const rt::SendStatus status = co_await sink.tell(Item{i});
      if (status == rt::SendStatus::sent) ++completed;
    }
  });
  ctx.poll();
  CHECK(completed == 2);  // two fit; the third tell waits
  CHECK_FALSE(sender.done);
  SinkMsg extra = Item{99};
  CHECK(sink.try_tell(extra) == rt::SendStatus::full);
  CHECK(std::get<Item>(extra).value == 99);  // still the caller's

  gate.open();
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    while (!sender.done) co_await asio::post(ctx, asio::use_awaitable);
    co_await sink.stop(rt::StopMode::drain);
    co_await group.wait();
  });
  sender.rethrow_if_failed();
  CHECK(completed == 5);
  CHECK(received == std::vector<int>{0, 1, 2, 3, 4});
}

namespace {

struct Tagged {
  std::uint32_t sender = 0;
  std::uint64_t seq = 0;
};
using CollectorMsg = std::variant<Tagged>;

constexpr std::size_t fan_in_senders = 4;

// Checks that each sender's messages arrive in the order sent. Written on the
// collector's thread, read after it has ended.
struct Collector {
  std::array<std::uint64_t, fan_in_senders>* next;
  std::uint64_t* out_of_order;
  void operator()(Tagged m) {
    if (m.seq != (*next)[m.sender]++) ++*out_of_order;
  }
};

asio::awaitable<void> send_tagged(rt::ActorRef<CollectorMsg> to, std::uint32_t sender,
                                  std::uint64_t count, std::uint64_t& refused) {
  for (std::uint64_t i = 0; i < count; ++i) {
    if (co_await to.tell(Tagged{sender, i}) != rt::SendStatus::sent) ++refused;
  }
}

}  // namespace

TEST_CASE("senders on two threads held back by a full mailbox lose nothing and keep their order") {
  const std::uint64_t per_sender = rt::test::million_or_less / 20;
  rt::LoopThread collector_thread;
  rt::LoopThread sender_thread;
  asio::io_context ctx{1};
  rt::TaskGroup group;
  std::array<std::uint64_t, fan_in_senders> next{};
  std::uint64_t out_of_order = 0;
  std::array<std::uint64_t, fan_in_senders> refused{};
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    auto collector = rt::spawn_actor<CollectorMsg>(group, collector_thread.executor(),
                                                   Collector{&next, &out_of_order},
                                                   {.name = "collector", .mailbox_capacity = 8});
    rt::TaskGroup senders;
    for (std::uint32_t s = 0; s < fan_in_senders; ++s) {
      // Half the senders share this thread, half another one.
      if (s % 2 == 0) {
        senders.spawn(ctx.get_executor(), send_tagged(collector, s, per_sender, refused[s]));
      } else {
        senders.spawn(sender_thread.executor(), send_tagged(collector, s, per_sender, refused[s]));
      }
    }
    co_await senders.wait();
    co_await collector.stop(rt::StopMode::drain);
    co_await group.wait();
    CHECK(collector.stats().handled == fan_in_senders * per_sender);
  });
  collector_thread.join();
  sender_thread.join();
  CHECK(out_of_order == 0);
  CHECK(refused == std::array<std::uint64_t, fan_in_senders>{});
  CHECK(next == std::array<std::uint64_t, fan_in_senders>{per_sender, per_sender, per_sender,
                                                          per_sender});
}
