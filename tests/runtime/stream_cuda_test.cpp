// CUDA streams. Tagged [gpu] where a device is needed (run by the device
// script); the error path runs everywhere CUDA is compiled.
#if PENSIEVE_HAVE_CUDA
#include "runtime/cuda/cuda_stream.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <latch>
#include <vector>

namespace asio = boost::asio;
using namespace pensieve::rt;

namespace {

std::unique_ptr<CudaStream> make_stream(std::string_view name, Tracer* tracer = nullptr) {
  auto stream = CudaStream::create(0, name, tracer);
  if (!stream) FAIL(stream.error().message);
  return std::move(*stream);
}

// Pinned host memory, freed on scope exit.
struct PinnedBuffer {
  explicit PinnedBuffer(std::size_t bytes) : size(bytes) {
    const cudaError_t status = cudaMallocHost(&data, bytes);
    if (status != cudaSuccess) FAIL(cuda_error_message("cudaMallocHost", status));
  }
  ~PinnedBuffer() { cudaFreeHost(data); }
  void* data = nullptr;
  std::size_t size;
};

struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t bytes) {
    const cudaError_t status = cudaMalloc(&data, bytes);
    if (status != cudaSuccess) FAIL(cuda_error_message("cudaMalloc", status));
    REQUIRE(cudaMemset(data, 0, bytes) == cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data); }
  void* data = nullptr;
};

}  // namespace

TEST_CASE("creating a CUDA stream on a missing device is an Error naming the failing call") {
  auto stream = CudaStream::create(1 << 20, "nowhere");
  REQUIRE(!stream.has_value());
  REQUIRE(stream.error().message.rfind("cudaSetDevice failed: ", 0) == 0);
}

TEST_CASE("a CUDA stream runs host functions in order and its event resumes a coroutine",
          "[gpu]") {
  asio::io_context io;  // outlives the stream, whose callbacks post to it
  auto stream = make_stream("compute");
  std::vector<int> ran;
  bool resumed_on_io = false;
  std::size_t ran_at_resume = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 100; ++i) stream->enqueue([&ran, i] { ran.push_back(i); });
        co_await stream->record().wait(io.get_executor());
        resumed_on_io = io.get_executor().running_in_this_thread();
        ran_at_resume = ran.size();
      },
      asio::detached);
  io.run();
  REQUIRE(resumed_on_io);
  REQUIRE(ran_at_resume == 100);
  for (int i = 0; i < 100; ++i) REQUIRE(ran[i] == i);
}

TEST_CASE("a CUDA stream waits on another stream's event on the device, not on the host",
          "[gpu]") {
  auto a = make_stream("copy");
  auto b = make_stream("compute");
  constexpr std::size_t bytes = 64 << 20;
  PinnedBuffer source(bytes), result(bytes);
  DeviceBuffer device(bytes);
  std::memset(source.data, 0x5A, bytes);
  std::memset(result.data, 0, bytes);

  std::latch gate(1);
  a->enqueue([&gate] { gate.wait(); });  // holds stream a
  a->copy(device.data, source.data, bytes, "h2d");
  const Event a_done = a->record();
  b->wait(a_done);  // returns at once
  b->copy(result.data, device.data, bytes, "d2h");
  const Event b_done = b->record();
  REQUIRE(!a_done.is_complete());
  REQUIRE(!b_done.is_complete());
  gate.count_down();
  b_done.wait_blocking();
  REQUIRE(a_done.is_complete());
  REQUIRE(std::memcmp(result.data, source.data, bytes) == 0);
}

TEST_CASE("a CPU event cannot be waited on by a CUDA stream", "[gpu]") {
  auto stream = make_stream("compute");
  auto state = std::make_shared<detail::EventState>();
  REQUIRE_THROWS_AS(stream->wait(Event(state)), CudaError);
  stream->wait(Event{});  // a complete default event is fine
  state->complete();
}
#endif
