// --compute-nice: the forward pass's threads run at a higher nice value so
// token delivery preempts them (the front end's latency under load). A
// thread only ever lowers its own priority; the CPU thread pool's workers
// follow the thread that starts their loop.
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "runtime/thread_priority.hpp"
#include "tools/pensieve/options.hpp"

#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace pensieve;

namespace {

// The kernel's nice value of the calling thread (not the cached one); -100
// if it cannot be read. No Catch2 assertion: workers call it concurrently.
int kernel_nice() {
  errno = 0;
  const int n = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
  return errno == 0 ? n : -100;
}

}  // namespace

TEST_CASE("a thread lowers its own priority, never raises it, and leaves other threads alone",
          "[net][priority]") {
  const int start = kernel_nice();  // the test may itself run under nice
  int lowered = -1, after_raise = -1, kernel_lowered = -1, kernel_after = -1;
  std::thread compute([&] {
    lowered = rt::lower_this_thread_priority(std::max(start, 7) + 1);
    kernel_lowered = kernel_nice();
    after_raise = rt::lower_this_thread_priority(0);  // a request to raise it changes nothing
    kernel_after = kernel_nice();
  });
  compute.join();
  const int want = std::min(rt::kMaxNice, std::max(start, 7) + 1);
  CHECK(lowered == want);
  CHECK(kernel_lowered == want);
  CHECK(after_raise == want);
  CHECK(kernel_after == want);
  CHECK(kernel_nice() == start);  // the creating thread kept its priority
}

TEST_CASE("the thread pool's workers follow the priority of the thread that starts their loop",
          "[net][priority]") {
  const int start = kernel_nice();
  const int want = std::min(rt::kMaxNice, std::max(start, 5) + 2);
  std::set<int> before, worker_nice;
  std::size_t threads_seen = 0;
  std::thread owner([&] {
    kernels::cpu::ThreadPool pool(3, 0);  // cost 0: every loop goes through the workers
    std::mutex m;
    std::set<std::size_t> indices;
    auto record = [&](std::size_t, std::size_t, std::size_t thread) {
      const int n = kernel_nice();
      std::lock_guard lock(m);
      worker_nice.insert(n);
      indices.insert(thread);
    };
    pool.parallel_for(3, record);  // at the owner's start priority
    before.swap(worker_nice);
    rt::lower_this_thread_priority(want);
    pool.parallel_for(3, record);
    threads_seen = indices.size();
  });
  owner.join();
  CHECK(before == std::set<int>{start});
  CHECK(threads_seen == 3);
  CHECK(worker_nice == std::set<int>{want});
  CHECK(kernel_nice() == start);
}

TEST_CASE("the idle class puts a thread and its pool's workers under SCHED_IDLE for good", "[net][priority]") {
  int lowered = -1, policy = -1, after_raise = -1, policy_after = -1;
  std::set<int> worker_policies;
  std::thread owner([&] {
    kernels::cpu::ThreadPool pool(3, 0);  // workers created before the change
    lowered = rt::lower_this_thread_priority(rt::kIdleClass);
    policy = ::sched_getscheduler(0);
    after_raise = rt::lower_this_thread_priority(3);  // no way back
    policy_after = ::sched_getscheduler(0);
    std::mutex m;
    pool.parallel_for(3, [&](std::size_t, std::size_t, std::size_t) {
      const int p = ::sched_getscheduler(0);
      std::lock_guard lock(m);
      worker_policies.insert(p);
    });
  });
  owner.join();
  CHECK(lowered == rt::kIdleClass);
  CHECK(policy == SCHED_IDLE);
  CHECK(after_raise == rt::kIdleClass);
  CHECK(policy_after == SCHED_IDLE);
  CHECK(worker_policies == std::set<int>{SCHED_IDLE});
  CHECK(::sched_getscheduler(0) != SCHED_IDLE);  // the creating thread kept its class
}

TEST_CASE("pensieve --compute-nice takes 0..19 or idle, is documented, and refuses anything else", "[net][priority]") {
  using server::parse_options;
  CHECK(parse_options({})->compute_nice == 0);
  CHECK(parse_options({"--compute-nice", "10"})->compute_nice == 10);
  CHECK(parse_options({"--compute-nice=19"})->compute_nice == 19);
  CHECK(parse_options({"--compute-nice", "idle"})->compute_nice == rt::kIdleClass);
  for (const char* bad : {"-1", "20", "x", "IDLE"}) {
    auto o = parse_options({"--compute-nice", bad});
    REQUIRE_FALSE(o.has_value());
    CHECK(o.error().message.find("--compute-nice") != std::string::npos);
  }
  CHECK(server::usage().find("--compute-nice N|idle") != std::string::npos);
}
