// Stop strings across token boundaries: the client never sees their start.
#include "gpu/text/stop_matcher.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace pm = pensieve::model;

TEST_CASE("text that cannot start a stop string is released as it arrives", "[stop]") {
  pm::StopMatcher m({"</s>"});
  auto a = m.push("Hello");
  CHECK(a.released == "Hello");
  CHECK_FALSE(a.stopped);
  CHECK(m.push(" world").released == " world");
  CHECK(m.flush().empty());
}

TEST_CASE("a stop string split over three pieces is never released", "[stop]") {
  pm::StopMatcher m({"world"});
  CHECK(m.push("Hello w").released == "Hello ");
  CHECK(m.held_bytes() == 1);
  CHECK(m.push("or").released.empty());
  const auto last = m.push("ld!");
  CHECK(last.stopped);
  CHECK(last.released.empty());
  CHECK(m.stopped());
}

TEST_CASE("a held prefix that stops matching is released in full", "[stop]") {
  pm::StopMatcher m({"</s>"});
  CHECK(m.push("a<").released == "a");
  CHECK(m.push("/b").released == "</b");
  CHECK(m.held_bytes() == 0);
}

TEST_CASE("text before a stop string in the same piece is released, the rest dropped",
          "[stop]") {
  pm::StopMatcher m({"</s>"});
  const auto step = m.push("abc</s>def");
  CHECK(step.stopped);
  CHECK(step.released == "abc");
}

TEST_CASE("the earliest of several completed stop strings wins", "[stop]") {
  pm::StopMatcher m({"cd", "bc"});
  const auto step = m.push("abcd");
  CHECK(step.stopped);
  CHECK(step.stop_index == 1);
  CHECK(step.released == "a");
}

TEST_CASE("overlapping partial matches hold back only what can still match", "[stop]") {
  pm::StopMatcher m({"aab"});
  CHECK(m.push("xaa").released == "x");
  CHECK(m.push("a").released == "a");  // "aaa": only the last "aa" can still match
  const auto step = m.push("b");
  CHECK(step.stopped);
  CHECK(step.released.empty());
}

TEST_CASE("the longest possible partial match among several stop strings is held", "[stop]") {
  pm::StopMatcher m({"xyz", "\n\nUser:"});
  CHECK(m.push("done.\n\nUs").released == "done.");
  CHECK(m.held_bytes() == 4);
  CHECK(m.flush() == "\n\nUs");
}

TEST_CASE("multi-byte stop strings are matched on whole characters", "[stop]") {
  pm::StopMatcher m({"。終"});
  CHECK(m.push("你好").released == "你好");
  CHECK(m.push("。").released.empty());
  const auto step = m.push("終わり");
  CHECK(step.stopped);
  CHECK(step.released.empty());
}

TEST_CASE("without stop strings everything passes straight through", "[stop]") {
  pm::StopMatcher m({"", ""});
  CHECK(m.push("anything </s>").released == "anything </s>");
  CHECK(m.held_bytes() == 0);
}
