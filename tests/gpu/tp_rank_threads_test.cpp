// TpRankThreads: the tensor-parallel ranks run on threads that persist from
// step to step (no thread start per forward pass), rank 0 on the caller's.
#include "gpu/model/tp_rank_threads.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

using pensieve::model::TpRankThreads;

TEST_CASE("every step runs each rank once, each rank always on the same thread, rank 0 on the caller's", "[tp]") {
  for (std::int32_t ranks : {1, 2, 4}) {
    INFO(ranks << " ranks");
    TpRankThreads threads(ranks);
    const auto n = static_cast<std::size_t>(ranks);
    std::vector<std::thread::id> first(n);
    for (int step = 0; step < 200; ++step) {
      std::vector<std::thread::id> seen(n);
      std::vector<int> calls(n, 0);
      threads.run([&](std::int32_t r) {
        seen[std::size_t(r)] = std::this_thread::get_id();
        ++calls[std::size_t(r)];
      });
      REQUIRE(calls == std::vector<int>(n, 1));
      if (step == 0) first = seen;
      REQUIRE(seen == first);
    }
    CHECK(first[0] == std::this_thread::get_id());
    CHECK(std::set<std::thread::id>(first.begin(), first.end()).size() == n);
  }
}

TEST_CASE("rank r > 0 runs on a thread named pv-tp-r", "[tp]") {
  TpRankThreads threads(3);
  std::vector<std::string> names(3);
  threads.run([&](std::int32_t r) {
    char buf[16] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    names[std::size_t(r)] = buf;
  });
  CHECK(names[1] == "pv-tp-1");
  CHECK(names[2] == "pv-tp-2");
}
