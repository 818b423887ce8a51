// CPU stream round trips: enqueue one piece of work, record an event, and
// learn of its completion, blocking or from a coroutine.
#include "runtime/cpu_stream.hpp"

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

namespace {

namespace asio = boost::asio;
using pensieve::rt::CpuStream;
using pensieve::rt::CpuStreamPool;

void BM_StreamEnqueueEventBlocking(benchmark::State& state) {
  CpuStreamPool pool(1);
  CpuStream stream(pool, "bench");
  int work = 0;
  for (auto _ : state) {
    stream.enqueue([&work] { ++work; });
    stream.record().wait_blocking();
  }
  benchmark::DoNotOptimize(work);
}
BENCHMARK(BM_StreamEnqueueEventBlocking)->UseRealTime();

void BM_StreamEnqueueEventCoroutine(benchmark::State& state) {
  asio::io_context io;  // outlives the stream, whose worker posts to it
  CpuStreamPool pool(1);
  CpuStream stream(pool, "bench");
  int work = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (auto _ : state) {
          stream.enqueue([&work] { ++work; });
          co_await stream.record().wait(io.get_executor());
        }
      },
      asio::detached);
  io.run();
  benchmark::DoNotOptimize(work);
}
BENCHMARK(BM_StreamEnqueueEventCoroutine)->UseRealTime();

void BM_StreamEnqueueOnly(benchmark::State& state) {  // amortised: one sync per 1024
  CpuStreamPool pool(1);
  CpuStream stream(pool, "bench");
  int work = 0;
  std::int64_t n = 0;
  for (auto _ : state) {
    stream.enqueue([&work] { ++work; });
    if (++n % 1024 == 0) stream.synchronize();
  }
  stream.synchronize();
  benchmark::DoNotOptimize(work);
}
BENCHMARK(BM_StreamEnqueueOnly)->UseRealTime();

}  // namespace
