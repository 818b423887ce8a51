// Stopping an actor: drain handles every accepted message, reject rejects
// them; either way every message is handled, rejected, or refused to its
// sender, and the counts add up exactly.
#include "runtime/actor.hpp"
#include "runtime/executor.hpp"
#include "tests/runtime/actor_test_support.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace rt = pensieve::rt;
using namespace std::chrono_literals;

struct Block {};  // the handler waits at the gate
struct Note {
  int value = 0;
};
struct Query {
  int value = 0;
  rt::Reply<int> reply;
};
using WorkerMsg = std::variant<Block, Note, Query>;

// What the worker saw; written on the worker's thread, read after join().
struct Log {
  std::vector<int> handled_notes;
  std::uint64_t handled_queries = 0;
  std::uint64_t rejected_notes = 0;
  std::uint64_t rejected_queries = 0;
};

struct Worker {
  rt::test::Gate* gate;
  Log* log;

  asio::awaitable<void> operator()(WorkerMsg msg) {
    if (std::holds_alternative<Block>(msg)) {
      co_await gate->pass();
    } else if (auto* note = std::get_if<Note>(&msg)) {
      log->handled_notes.push_back(note->value);
    } else {
      auto& query = std::get<Query>(msg);
      ++log->handled_queries;
      query.reply.send(query.value);
    }
  }
  void on_rejected(WorkerMsg& msg) {
    if (std::holds_alternative<Note>(msg)) ++log->rejected_notes;
    if (std::holds_alternative<Query>(msg)) ++log->rejected_queries;
  }
};

// Blocks the worker at its gate, queues `notes` notes and `queries` asks
// behind it, stops it in `mode`, opens the gate and collects the answers.
struct StopScenario {
  static constexpr int notes = 10;
  static constexpr int queries = 5;
  Log log;
  rt::ActorStats stats;
  std::vector<rt::AskResult<int>> answers;
  rt::SendStatus after_stop = rt::SendStatus::sent;

  void run(rt::StopMode mode) {
    asio::io_context ctx{1};
    rt::TaskGroup group;
    rt::test::Gate gate(ctx.get_executor());
    auto worker = rt::spawn_actor<WorkerMsg>(group, ctx.get_executor(), Worker{&gate, &log},
                                             {.name = "worker", .mailbox_capacity = 64});
    REQUIRE(worker.try_tell(Block{}) == rt::SendStatus::sent);
    ctx.poll();  // the worker takes Block and waits at the gate
    for (int i = 0; i < notes; ++i) REQUIRE(worker.try_tell(Note{i}) == rt::SendStatus::sent);
    rt::test::Outcome askers[queries];
    answers.resize(queries, rt::ask_error<int>(rt::AskError::no_reply));
    for (int i = 0; i < queries; ++i) {
      rt::test::spawn_body(ctx, askers[i], [&, i]() -> asio::awaitable<void> {
        Query query{i};  // named: see "GCC 12" in runtime/actor.hpp
        answers[i] = co_await worker.ask(std::move(query));
      });
    }
    ctx.poll();  // the asks are queued behind the notes
    worker.request_stop(mode);
    after_stop = worker.try_tell(Note{-1});
    gate.open();
    rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
      co_await worker.join();
      co_await group.wait();
    });
    for (auto& asker : askers) asker.rethrow_if_failed();
    stats = worker.stats();
  }
};

}  // namespace

TEST_CASE("stop(drain) handles every message accepted before it") {
  StopScenario s;
  s.run(rt::StopMode::drain);
  CHECK(s.after_stop == rt::SendStatus::closed);
  CHECK(s.log.handled_notes == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(s.log.handled_queries == StopScenario::queries);
  for (int i = 0; i < StopScenario::queries; ++i) CHECK(s.answers[i].value() == i);
  CHECK(s.stats.handled == 1 + StopScenario::notes + StopScenario::queries);
  CHECK(s.stats.rejected == 0);
}

TEST_CASE("stop(reject) rejects every queued message and answers each ask with actor_stopped") {
  StopScenario s;
  s.run(rt::StopMode::reject);
  CHECK(s.after_stop == rt::SendStatus::closed);
  CHECK(s.log.handled_notes.empty());
  CHECK(s.log.handled_queries == 0);
  CHECK(s.log.rejected_notes == StopScenario::notes);
  CHECK(s.log.rejected_queries == StopScenario::queries);
  for (auto& answer : s.answers) CHECK(answer.error() == rt::AskError::actor_stopped);
  CHECK(s.stats.handled == 1);  // Block, in hand when the stop came
  CHECK(s.stats.rejected == StopScenario::notes + StopScenario::queries);
}

TEST_CASE("stopping the task group stops its actors and rejects what they had queued") {
  asio::io_context ctx{1};
  rt::TaskGroup group;
  rt::test::Gate gate(ctx.get_executor());
  Log log;
  auto worker = rt::spawn_actor<WorkerMsg>(group, ctx.get_executor(), Worker{&gate, &log});
  REQUIRE(worker.try_tell(Block{}) == rt::SendStatus::sent);
  ctx.poll();
  for (int i = 0; i < 3; ++i) REQUIRE(worker.try_tell(Note{i}) == rt::SendStatus::sent);
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> { co_await group.stop(); });
  CHECK(worker.ended());
  CHECK(log.rejected_notes == 3);
  CHECK(worker.stats().rejected == 3);
  CHECK(worker.try_tell(Note{9}) == rt::SendStatus::closed);
}

namespace {

// Sends notes and asks from this thread to a worker on another thread until
// the worker stops itself mid-stream; counts every outcome.
struct InFlight {
  std::uint64_t notes_sent = 0;      // accepted
  std::uint64_t notes_refused = 0;   // closed at the door
  std::uint64_t answers = 0;         // asks answered
  std::uint64_t asks_stopped = 0;    // asks refused or rejected
};

// Stops itself (reject) when it has handled `stop_after` notes. Its own ref
// is only known after spawning, so it comes through a shared slot written
// before the first message is sent.
struct SelfStopper {
  std::uint64_t stop_after;
  Log* log;
  std::shared_ptr<rt::ActorRef<WorkerMsg>> self;
  void operator()(WorkerMsg msg) {
    if (auto* note = std::get_if<Note>(&msg)) {
      log->handled_notes.push_back(note->value);
      if (log->handled_notes.size() == stop_after) self->request_stop(rt::StopMode::reject);
    } else if (auto* query = std::get_if<Query>(&msg)) {
      ++log->handled_queries;
      query->reply.send(query->value);
    }
  }
  void on_rejected(WorkerMsg& msg) {
    if (std::holds_alternative<Note>(msg)) ++log->rejected_notes;
    if (std::holds_alternative<Query>(msg)) ++log->rejected_queries;
  }
};

}  // namespace

TEST_CASE("an actor stopping with messages in flight from another thread loses none") {
  constexpr int senders = 3;
  constexpr int per_sender = 20'000;
  rt::LoopThread worker_thread;
  asio::io_context ctx{1};
  rt::TaskGroup group;
  Log log;
  InFlight counts;
  rt::test::run_body(ctx, [&]() -> asio::awaitable<void> {
    auto self = std::make_shared<rt::ActorRef<WorkerMsg>>();
    auto worker = rt::spawn_actor<WorkerMsg>(group, worker_thread.executor(),
                                             SelfStopper{5'000, &log, self},
                                             {.name = "self-stopper", .mailbox_capacity = 16});
    *self = worker;
    {
      rt::TaskGroup senders_group;
      for (int s = 0; s < senders; ++s) {
        senders_group.spawn(ctx.get_executor(), [&, s]() -> asio::awaitable<void> {
          for (int i = 0; i < per_sender; ++i) {
            if (i % 10 == 9) {
              Query query{s * per_sender + i};
              auto r = co_await worker.ask(std::move(query));
              if (r) ++counts.answers;
              else if (r.error() == rt::AskError::actor_stopped) ++counts.asks_stopped;
            } else if (co_await worker.tell(Note{s * per_sender + i}) == rt::SendStatus::sent) {
              ++counts.notes_sent;
            } else {
              ++counts.notes_refused;
            }
          }
        });
      }
      co_await senders_group.wait();
    }
    co_await worker.join();
    co_await group.wait();
    self.reset();
  });
  worker_thread.join();
  const std::uint64_t total = senders * per_sender;
  const std::uint64_t asks = total / 10;
  CHECK(log.handled_notes.size() == 5'000);
  // Every accepted note was handled or rejected; every note was accepted or refused.
  CHECK(counts.notes_sent == log.handled_notes.size() + log.rejected_notes);
  CHECK(counts.notes_sent + counts.notes_refused == total - asks);
  // Every ask was answered, or told the actor stopped (refused or rejected).
  CHECK(counts.answers == log.handled_queries);
  CHECK(counts.answers + counts.asks_stopped == asks);
  CHECK(counts.asks_stopped >= log.rejected_queries);
  CHECK(counts.notes_refused > 0);  // the stop did land mid-stream
}
