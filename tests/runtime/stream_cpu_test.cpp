// CPU streams: order within a stream, events, coroutine resumption, and
// cross-stream waits that park a stream without blocking a thread.
#include "runtime/cpu_stream.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <latch>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace pensieve::rt;

TEST_CASE("a CPU stream runs its work in enqueue order") {
  CpuStreamPool pool(3);
  CpuStream stream(pool, "compute");
  std::vector<int> ran;  // only the stream's work touches it, one item at a time
  constexpr int count = 5000;
  for (int i = 0; i < count; ++i) stream.enqueue([&ran, i] { ran.push_back(i); });
  stream.synchronize();
  std::vector<int> expected(count);
  std::iota(expected.begin(), expected.end(), 0);
  REQUIRE(ran == expected);
}

TEST_CASE("several CPU streams of one pool each keep their own order") {
  CpuStreamPool pool(3);
  constexpr int streams = 4;
  constexpr int count = 2000;
  std::vector<std::unique_ptr<CpuStream>> s;
  std::vector<std::vector<int>> ran(streams);
  for (int k = 0; k < streams; ++k) s.push_back(std::make_unique<CpuStream>(pool, "s"));
  for (int i = 0; i < count; ++i) {
    for (int k = 0; k < streams; ++k) s[k]->enqueue([&ran, k, i] { ran[k].push_back(i); });
  }
  for (auto& stream : s) stream->synchronize();
  std::vector<int> expected(count);
  std::iota(expected.begin(), expected.end(), 0);
  for (int k = 0; k < streams; ++k) REQUIRE(ran[k] == expected);
}

TEST_CASE("events of a CPU stream complete in order, each after the work before it") {
  CpuStreamPool pool(2);
  CpuStream stream(pool, "compute");
  constexpr int count = 200;
  std::latch gate(1);                 // holds the stream until every continuation is registered
  std::latch continuations_ran(count);  // the test reads the results only after all ran
  std::atomic<int> work_done{0};
  std::vector<int> completed;  // written by continuations, which run one after another
  std::vector<int> work_seen_at_completion;
  std::vector<Event> events;
  stream.enqueue([&gate] { gate.wait(); });
  for (int i = 0; i < count; ++i) {
    stream.enqueue([&work_done] { work_done.fetch_add(1); });
    events.push_back(stream.record());
  }
  for (int i = 0; i < count; ++i) {
    REQUIRE(!events[i].is_complete());
    events[i].on_complete([&, i] {
      completed.push_back(i);
      work_seen_at_completion.push_back(work_done.load());
      continuations_ran.count_down();
    });
  }
  gate.count_down();
  continuations_ran.wait();
  REQUIRE(completed.size() == count);
  for (int i = 0; i < count; ++i) {
    REQUIRE(completed[i] == i);
    REQUIRE(work_seen_at_completion[i] == i + 1);  // the stream runs nothing past the event yet
  }
  for (const Event& e : events) REQUIRE(e.is_complete());
}

TEST_CASE("co_await on an event resumes the coroutine on the given executor after the work ran") {
  asio::io_context io;  // outlives the stream, whose worker posts to it
  CpuStreamPool pool(2);
  CpuStream stream(pool, "compute");
  std::atomic<bool> work_ran{false};
  std::thread::id work_thread;
  bool resumed_on_io = false;
  bool work_ran_before_resume = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        stream.enqueue([&] {
          work_thread = std::this_thread::get_id();
          work_ran = true;
        });
        co_await stream.record().wait(io.get_executor());
        work_ran_before_resume = work_ran.load();
        resumed_on_io = io.get_executor().running_in_this_thread();
      },
      asio::detached);
  io.run();  // returns only once the coroutine finished: the wait kept io busy
  REQUIRE(work_ran_before_resume);
  REQUIRE(resumed_on_io);
  REQUIRE(work_thread != std::this_thread::get_id());  // the work ran on a pool worker
}

TEST_CASE("a default event is complete and waiting on it resumes at once") {
  asio::io_context io;
  Event none;
  REQUIRE(none.is_complete());
  bool resumed = false;
  none.wait(io.get_executor(), [&] { resumed = true; });
  REQUIRE(!resumed);  // completion is posted, never run inline
  io.run();
  REQUIRE(resumed);
}

TEST_CASE("a stream waiting on another stream's event starts nothing past the wait before it, "
          "and blocks neither the host nor a worker") {
  CpuStreamPool pool(2);
  CpuStream a(pool, "a");
  CpuStream b(pool, "b");
  CpuStream c(pool, "c");
  std::latch gate(1);  // holds a's work until the test opens it
  std::atomic<bool> a_done{false};
  std::atomic<bool> b_before_ran{false};
  std::atomic<int> b_after_ran{0};
  bool a_done_seen_by_b = false;

  a.enqueue([&] {
    gate.wait();
    a_done = true;
  });
  const Event a_event = a.record();
  b.enqueue([&] { b_before_ran = true; });
  const Event b_before = b.record();
  b.wait(a_event);  // returns at once: the host is not blocked
  b.enqueue([&] {
    a_done_seen_by_b = a_done.load();
    b_after_ran.fetch_add(1);
  });
  const Event b_after = b.record();

  // b's work before the wait runs while a is held.
  b_before.wait_blocking();
  REQUIRE(b_before_ran);
  // b is parked without holding a worker: one worker runs a's gated work,
  // the other is free to run c.
  std::atomic<bool> c_ran{false};
  c.enqueue([&] { c_ran = true; });
  c.synchronize();
  REQUIRE(c_ran);
  REQUIRE(!a_event.is_complete());
  REQUIRE(b_after_ran.load() == 0);
  REQUIRE(!b_after.is_complete());

  gate.count_down();
  b_after.wait_blocking();
  REQUIRE(a_done_seen_by_b);
  REQUIRE(b_after_ran.load() == 1);
}

TEST_CASE("waiting on a completed event does not delay a stream") {
  CpuStreamPool pool(1);
  CpuStream a(pool, "a");
  CpuStream b(pool, "b");
  a.enqueue([] {});
  const Event done = a.record();
  done.wait_blocking();
  b.wait(done);
  b.wait(Event{});
  int ran = 0;
  b.enqueue([&ran] { ++ran; });
  b.synchronize();
  REQUIRE(ran == 1);
}

TEST_CASE("a stream copy moves the bytes in stream order") {
  CpuStreamPool pool(2);
  CpuStream stream(pool, "copy");
  std::vector<int> src(1000);
  std::iota(src.begin(), src.end(), 7);
  std::vector<int> mid(1000, 0);
  std::vector<int> dst(1000, 0);
  stream.copy(mid.data(), src.data(), src.size() * sizeof(int));
  stream.copy(dst.data(), mid.data(), mid.size() * sizeof(int));  // sees the first copy's result
  stream.synchronize();
  REQUIRE(dst == src);
}

TEST_CASE("destroying a CPU stream waits for the work already enqueued") {
  CpuStreamPool pool(2);
  std::atomic<int> ran{0};
  {
    CpuStream stream(pool, "short-lived");
    for (int i = 0; i < 100; ++i) stream.enqueue([&ran] { ran.fetch_add(1); });
  }
  REQUIRE(ran.load() == 100);
}

TEST_CASE("a traced CPU stream records one span per work item and one per wait") {
  Tracer tracer;
  tracer.enable();
  CpuStreamPool pool(2);
  CpuStream a(pool, "copy", &tracer);
  CpuStream b(pool, "compute", &tracer);
  std::latch gate(1);
  const std::int64_t before_ns = steady_now_ns();
  a.enqueue([&gate] { gate.wait(); }, "layer0");
  b.wait(a.record());
  b.enqueue([] {}, "attention");
  const Event b_done = b.record();
  gate.count_down();
  b_done.wait_blocking();
  a.synchronize();
  const std::int64_t after_ns = steady_now_ns();

  std::vector<Span> spans = tracer.drain();
  REQUIRE(spans.size() == 3);
  int layer0 = 0, attention = 0, wait = 0;
  for (const Span& s : spans) {
    REQUIRE(s.kind == SpanKind::stream);
    REQUIRE(s.start_ns >= before_ns);
    REQUIRE(s.start_ns <= s.end_ns);
    REQUIRE(s.end_ns <= after_ns);
    REQUIRE(s.thread < tracer.thread_count());
    if (s.actor == "copy" && s.name == "layer0") ++layer0;
    if (s.actor == "compute" && s.name == "attention") ++attention;
    if (s.actor == "compute" && s.name == "wait_event") ++wait;
  }
  REQUIRE(layer0 == 1);
  REQUIRE(attention == 1);
  REQUIRE(wait == 1);
}

TEST_CASE("an untraced or disabled-tracer stream records nothing") {
  Tracer tracer;  // disabled
  CpuStreamPool pool(1);
  CpuStream stream(pool, "compute", &tracer);
  stream.enqueue([] {}, "op");
  stream.synchronize();
  REQUIRE(tracer.drain().empty());
  REQUIRE(tracer.thread_count() == 0);
}
