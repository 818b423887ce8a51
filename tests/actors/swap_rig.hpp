#pragma once
// A swap engine on its own loop thread, over a device pool the test owns,
// for tests that drive it message by message: fills pools with patterns,
// asks from the test thread and collects the engine's reports.
#include "actors/disk_tier.hpp"
#include "actors/swap_engine.hpp"
#include "runtime/actor.hpp"
#include "runtime/executor.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

namespace pensieve::testing {

namespace asio = boost::asio;

// Q8_0 rows are whole multiples of 32 values: 2 heads of 48 then, 96 values in
// a 64-value block and a last block of 32 (66 + 34 bytes).
inline kv::KvPoolConfig small_pool(std::int32_t blocks, kv::KvDType dtype = kv::KvDType::f32) {
  kv::KvPoolConfig c;
  c.num_blocks = blocks;
  c.block_tokens = 4;
  c.n_layers = 3;
  c.n_kv_heads = 2;
  c.head_dim = dtype == kv::KvDType::q8_0 ? 48 : 8;
  c.dtype = dtype;
  c.tier = kv::Tier::device;
  c.poison_freed = false;
  return c;
}

// The bytes of block `b`'s slice of layer `l`.
inline std::span<std::byte> slice_of(const kv::KvPool& pool, std::int32_t l, std::uint32_t b) {
  const kv::PagedKvView v = pool.layer(l);
  const std::size_t bytes = v.block_bytes();
  return {static_cast<std::byte*>(v.data) + std::size_t(b) * bytes, bytes};
}

inline std::vector<std::byte> copy_of(const kv::KvPool& pool, std::int32_t l, std::uint32_t b) {
  auto s = slice_of(pool, l, b);
  return {s.begin(), s.end()};
}

// Every float of every block gets a value naming (tag, layer, block, index).
inline void fill_pattern(kv::KvPool& pool, float tag) {
  for (std::int32_t l = 0; l < pool.config().n_layers; ++l) {
    for (std::int32_t b = 0; b < pool.config().num_blocks; ++b) {
      auto s = slice_of(pool, l, std::uint32_t(b));
      auto* f = reinterpret_cast<float*>(s.data());
      for (std::size_t i = 0; i < s.size() / sizeof(float); ++i) f[i] = tag * 1e6f + float(l * 10000 + b * 100) + float(i % 97);
    }
  }
}

struct SwapRig {
  // `disk_dir` non-empty: a disk tier of `disk_bytes` there.
  explicit SwapRig(std::int32_t device_blocks, std::int32_t host_slots, actors::SwapEngineConfig config = {},
                   const std::string& disk_dir = {}, std::uint64_t disk_bytes = 0,
                   kv::KvDType dtype = kv::KvDType::f32)
      : device(std::make_shared<kv::KvPool>(small_pool(device_blocks, dtype))),
        streams(std::make_shared<rt::CpuStreamPool>(2)) {
    config.host_slots = host_slots;
    if (!disk_dir.empty()) {
      kv::KvPoolConfig layout = small_pool(host_slots, dtype);
      auto store = actors::open_disk_tier(loop.executor(), disk_dir, disk_bytes, layout);
      REQUIRE(store.has_value());
      config.disk = std::move(*store);
    }
    config.report = [this](actors::TransfersDone d) {
      std::lock_guard lock(mutex);
      reports.push_back(std::move(d));
      reported.notify_all();
    };
    actors::SwapEngine engine(device, streams, group, loop.executor(), std::move(config));
    host = &engine.host_pool();
    ref = rt::spawn_actor<actors::SwapEngineMsg>(group, loop.executor(), std::move(engine), {.name = "swap engine"});
  }
  ~SwapRig() {
    auto stop = [this]() -> asio::awaitable<void> {
      co_await ref.stop(rt::StopMode::drain);
      co_await group.stop();
    };
    asio::co_spawn(loop.executor(), stop(), asio::use_future).get();
    loop.join();
  }

  actors::SwapTicket submit(actors::KvTransfers t) {
    auto ask = [this](actors::KvTransfers transfers) -> asio::awaitable<rt::AskResult<actors::SwapTicket>> {
      actors::SwapIteration m;
      m.transfers = std::move(transfers);
      co_return co_await ref.ask(std::move(m));
    };
    auto r = asio::co_spawn(loop.executor(), ask(std::move(t)), asio::use_future).get();
    REQUIRE(r.has_value());
    return std::move(*r);
  }

  actors::SwapStats stats() {
    auto ask = [this]() -> asio::awaitable<rt::AskResult<actors::SwapStats>> {
      actors::GetSwapStats m;
      co_return co_await ref.ask(std::move(m));
    };
    auto r = asio::co_spawn(loop.executor(), ask(), asio::use_future).get();
    REQUIRE(r.has_value());
    return *r;
  }

  // Waits for the n-th report (from 1); a generous bound only against a hang.
  actors::TransfersDone wait_report(std::size_t n) {
    std::unique_lock lock(mutex);
    const bool ok = reported.wait_for(lock, std::chrono::seconds(60), [&] { return reports.size() >= n; });
    REQUIRE(ok);
    return reports[n - 1];
  }

  rt::LoopThread loop;
  rt::TaskGroup group;
  std::shared_ptr<kv::KvPool> device;
  std::shared_ptr<rt::CpuStreamPool> streams;
  kv::KvPool* host = nullptr;
  rt::ActorRef<actors::SwapEngineMsg> ref;
  std::mutex mutex;
  std::condition_variable reported;
  std::vector<actors::TransfersDone> reports;
};

}  // namespace pensieve::testing
