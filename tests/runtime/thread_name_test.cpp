// The server's threads carry their role's name (rt::name_this_thread), which
// `top -H`, perf and bench/clients-scaling.sh's per-role CPU times read.
#include "runtime/cpu_stream.hpp"
#include "runtime/executor.hpp"
#include "runtime/thread_name.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/post.hpp>

#include <future>
#include <string>
#include <thread>

#include <pthread.h>

TEST_CASE("a LoopThread runs its handlers on a thread with the name it was given", "[runtime]") {
  pensieve::rt::LoopThread loop("pv-control");
  std::promise<std::string> seen;
  boost::asio::post(loop.executor(), [&] {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    seen.set_value(name);
  });
  CHECK(seen.get_future().get() == "pv-control");
  loop.join();
}

TEST_CASE("a thread name longer than Linux keeps is cut to 15 bytes, not refused", "[runtime]") {
  std::string name;
  std::thread t([&] {
    pensieve::rt::name_this_thread("pv-a-name-of-twenty-four");
    char buf[16] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    name = buf;
  });
  t.join();
  CHECK(name == "pv-a-name-of-tw");
}

TEST_CASE("a CPU stream's work runs on the pool's threads named pv-stream", "[runtime]") {
  pensieve::rt::CpuStreamPool pool(3);
  std::string seen;
  {
    pensieve::rt::CpuStream stream(pool, "compute");
    stream.enqueue([&seen] {
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof name);
      seen = name;
    });
    stream.synchronize();
  }
  CHECK(seen == "pv-stream");
}
