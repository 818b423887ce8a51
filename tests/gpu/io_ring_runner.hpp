#pragma once
// Runs a disk-tier test body as a coroutine over a fresh io_uring ring.
#include "runtime/io_ring.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <exception>

namespace pensieve::testing {

// Runs `body(ring)` as a coroutine on a fresh io_context until it finishes.
template <class Body>
void run_with_ring(Body body) {
  boost::asio::io_context io;
  auto ring = rt::IoRing::create(io.get_executor(), 64);
  if (!ring) FAIL("io_uring: " << ring.error().message);
  bool finished = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        co_await body(*ring);
        finished = true;
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  REQUIRE(finished);
}

}  // namespace pensieve::testing
