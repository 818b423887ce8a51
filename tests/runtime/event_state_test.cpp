// The completion state behind Event: continuations run once, in order, and
// never before completion.
#include "runtime/event.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <thread>
#include <vector>

using namespace pensieve::rt;

TEST_CASE("an event runs its continuations once, in registration order, when it completes") {
  auto state = std::make_shared<detail::EventState>();
  Event event(state);
  std::vector<int> ran;
  for (int i = 0; i < 5; ++i) event.on_complete([&ran, i] { ran.push_back(i); });
  REQUIRE(ran.empty());
  REQUIRE(!event.is_complete());
  state->complete();
  REQUIRE(event.is_complete());
  REQUIRE(ran == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("a continuation added after completion runs at once on the calling thread") {
  auto state = std::make_shared<detail::EventState>();
  state->complete();
  std::thread::id ran_on;
  Event(state).on_complete([&ran_on] { ran_on = std::this_thread::get_id(); });
  REQUIRE(ran_on == std::this_thread::get_id());
}

TEST_CASE("copies of an event share one completion") {
  auto state = std::make_shared<detail::EventState>();
  const Event a(state);
  const Event b = a;
  REQUIRE(!b.is_complete());
  std::thread completer([state] { state->complete(); });
  b.wait_blocking();
  completer.join();
  REQUIRE(a.is_complete());
  REQUIRE(a.device_event() == nullptr);
}

TEST_CASE("a HostFn owns a move-only callable") {
  auto value = std::make_unique<int>(41);
  int seen = 0;
  HostFn fn([v = std::move(value), &seen] { seen = *v + 1; });
  REQUIRE(static_cast<bool>(fn));
  HostFn moved = std::move(fn);
  moved();
  REQUIRE(seen == 42);
}
