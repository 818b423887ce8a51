// The compute pool's workers carry their role's name (rt::name_this_thread),
// which `top -H`, perf and bench/clients-scaling.sh's per-role CPU times read.
#include "gpu/kernels/cpu/thread_pool.hpp"

#include <catch2/catch.hpp>

#include <mutex>
#include <set>
#include <string>

#include <pthread.h>

namespace {

std::string this_thread_name() {
  char name[16] = {};
  REQUIRE(pthread_getname_np(pthread_self(), name, sizeof name) == 0);
  return name;
}

}  // namespace

TEST_CASE("the compute pool's workers are named pv-compute-N, the caller keeps its name",
          "[kernels]") {
  const std::string caller = this_thread_name();
  pensieve::kernels::cpu::ThreadPool pool(3, 0.0);
  std::mutex m;
  std::set<std::string> names;
  for (int round = 0; round < 4; ++round)
    pool.parallel_for(3, [&](std::size_t, std::size_t, std::size_t thread) {
      char buf[16] = {};
      pthread_getname_np(pthread_self(), buf, sizeof buf);
      std::lock_guard lock(m);
      names.insert(std::to_string(thread) + ":" + buf);
    });
  CHECK(names == std::set<std::string>{"0:" + caller, "1:pv-compute-1", "2:pv-compute-2"});
}
