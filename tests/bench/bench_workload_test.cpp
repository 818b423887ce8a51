// The workload of pensieve-bench is fixed by its seed.
#include "bench/pensieve-bench/workload.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace pensieve::bench;

namespace {

std::vector<Conversation> three_conversations() {
  return {
      {"a", {{"user", "hi"}, {"assistant", std::string(20, 'x')}, {"user", "more"}, {"assistant", "12345678"}}},
      {"b", {{"system", "be brief"}, {"user", "q"}, {"assistant", std::string(4000, 'y')}, {"user", "again"}}},
      // Four code points of two bytes each: one token, not two.
      {"c", {{"user", "x"}, {"assistant", "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"}, {"user", "y"}, {"assistant", "z"}}},
  };
}

}  // namespace

TEST_CASE("the same seed gives the same arrivals, think times and lengths", "[bench]") {
  const auto data = three_conversations();
  const WorkloadParams p{20, 5.0, 128, 42};
  const Workload a = make_workload(data, p);
  const Workload b = make_workload(data, p);
  REQUIRE(a.conversations.size() == 20);
  for (std::size_t i = 0; i < 20; ++i) {
    CHECK(a.conversations[i].unit_arrival_s == b.conversations[i].unit_arrival_s);
    REQUIRE(a.conversations[i].turns.size() == b.conversations[i].turns.size());
    for (std::size_t t = 0; t < a.conversations[i].turns.size(); ++t) {
      CHECK(a.conversations[i].turns[t].think_s == b.conversations[i].turns[t].think_s);
      CHECK(a.conversations[i].turns[t].max_tokens == b.conversations[i].turns[t].max_tokens);
    }
  }
  const Workload c = make_workload(data, {20, 5.0, 128, 43});
  CHECK(c.conversations[1].unit_arrival_s != a.conversations[1].unit_arrival_s);
  CHECK(c.conversations[0].turns[1].think_s != a.conversations[0].turns[1].think_s);
}

TEST_CASE("arrivals form a Poisson process of rate 1 that starts at 0", "[bench]") {
  const std::vector<Conversation> data{{"a", {{"user", "hi"}, {"assistant", "yo"}}}};
  const Workload w = make_workload(data, {4000, 0.0, 128, 7});
  CHECK(w.conversations[0].unit_arrival_s == 0.0);
  for (std::size_t i = 1; i < w.conversations.size(); ++i) {
    CHECK(w.conversations[i].unit_arrival_s > w.conversations[i - 1].unit_arrival_s);
  }
  // Mean gap of 3999 exponential(1) gaps: 1 within 5 standard errors (fixed seed).
  const double mean_gap = w.conversations.back().unit_arrival_s / 3999.0;
  CHECK(std::abs(mean_gap - 1.0) < 5.0 / std::sqrt(3999.0));
  CHECK(unit_exponential(0) > 0.0);
  CHECK(std::isfinite(unit_exponential(~0ull)));
}

TEST_CASE("each user turn asks for its dataset reply's length, chars/4, capped", "[bench]") {
  const Workload w = make_workload(three_conversations(), {0, 0.0, 128, 1});
  REQUIRE(w.conversations.size() == 3);
  CHECK(w.requests() == 6);
  const auto& a = w.conversations[0];
  CHECK(a.id == "a");
  REQUIRE(a.turns.size() == 2);
  CHECK(a.turns[0].max_tokens == 5);
  CHECK(a.turns[1].max_tokens == 2);
  CHECK(a.turns[0].new_messages.size() == 1);
  CHECK(a.turns[1].new_messages[0].content == "more");
  CHECK(a.turns[0].think_s == 0.0);
  CHECK(a.turns[1].think_s == 0.0);  // mean 0: no think time
  const auto& b = w.conversations[1];
  REQUIRE(b.turns.size() == 2);
  CHECK(b.turns[0].max_tokens == 128);  // 1000 tokens, capped
  CHECK(b.turns[1].max_tokens == 128);  // no reply in the data: the cap
  REQUIRE(b.turns[0].new_messages.size() == 2);  // the system message goes with the first turn
  CHECK(b.turns[0].new_messages[0].role == "system");
  CHECK(w.conversations[2].turns[0].max_tokens == 1);
  CHECK(w.conversations[2].turns[1].max_tokens == 1);
}

TEST_CASE("more conversations than the file has repeat it in order", "[bench]") {
  const Workload w = make_workload(three_conversations(), {7, 1.0, 16, 1});
  REQUIRE(w.conversations.size() == 7);
  CHECK(w.conversations[3].dataset_index == 0);
  CHECK(w.conversations[6].id == "a");
  CHECK(w.conversations[1].turns[0].max_tokens == 16);
  CHECK(w.conversations[0].turns[1].think_s > 0.0);
}
