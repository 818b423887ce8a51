// The order a device run sees, checked with fake device streams that log
// every call (fake_device_stream.hpp): the swap engine's copies of layer l
// come before layer l's event and after layer l-1's; the device-to-host
// copies wait for the iteration's last host-to-device event (no D2H while
// H2D of the same iteration is pending); gathered transfers are cut at
// max_transfer_bytes; and a backend that waits on the device gets each
// layer's event just before that layer (not before), while the worker's
// thread never blocks on a copy.
#include "actors/gpu_worker.hpp"
#include "actors/kv_copy_plan.hpp"
#include "actors/swap_engine.hpp"
#include "gpu/backend/layer_gates.hpp"
#include "tests/actors/fake_device_stream.hpp"
#include "tests/actors/swap_rig.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <chrono>
#include <future>

using namespace pensieve;
using namespace pensieve::testing;
using actors::DeviceHostCopy;
using actors::HostSlot;

namespace {

DeviceHostCopy dh(std::uint32_t device, std::uint32_t host) { return {kv::BlockId{device}, HostSlot{host}}; }

// A backend that computes nothing and logs what the worker asks of it, as
// the CUDA backend would enqueue it (LayerGates, as CudaForward uses them).
class GatedForward final : public backend::PagedForward {
 public:
  GatedForward(std::shared_ptr<DeviceLog> log, kv::KvPoolConfig pool) : log_(std::move(log)), pool_(pool) {
    config_.n_layers = pool.n_layers;
    config_.vocab_size = 8;
  }
  const model::ModelConfig& config() const override { return config_; }
  const kv::KvPoolConfig& pool_config() const override { return pool_; }
  std::int32_t ranks() const override { return 1; }
  std::shared_ptr<kv::KvPool> host_pool() const override { return nullptr; }
  bool supports_host_tier() const override { return true; }
  Result<void> poison(kv::BlockId) override { return {}; }
  Result<void> copy_prefix(kv::BlockId src, kv::BlockId dst, std::int32_t) override {
    log_->add("compute copy_prefix " + std::to_string(src.value) + "->" + std::to_string(dst.value));
    return {};
  }
  Result<model::ForwardOutput> forward_paged(std::span<const model::PagedSequence> batch,
                                             const model::CpuForward::LayerHook&) override {
    for (std::int32_t l = 0; l < config_.n_layers; ++l) {
      gates_.before_layer(l, [&](const rt::Event& e) { log_->wait("compute", e); });
      log_->add("compute layer " + std::to_string(l));
    }
    gates_.clear();
    model::ForwardOutput out;
    out.vocab_size = config_.vocab_size;
    out.first_row.assign(batch.size() + 1, 0);
    return out;
  }
  bool gates_on_device() const override { return true; }
  void gate_next_pass(std::vector<rt::Event> ready) override { gates_.arm(std::move(ready)); }
  Result<void> wait_on_device(const rt::Event& e) override {
    log_->wait("compute", e);
    return {};
  }

 private:
  std::shared_ptr<DeviceLog> log_;
  kv::KvPoolConfig pool_;
  model::ModelConfig config_;
  backend::LayerGates gates_;
};

}  // namespace

TEST_CASE("gathered runs are cut at the largest transfer", "[swap][device_order]") {
  const std::vector<actors::SlotCopy> copies{{0, 10}, {1, 11}, {2, 12}, {3, 13}, {4, 14}, {8, 20}};
  CHECK(actors::plan_chunk_runs(copies, true, 2) ==
        std::vector<actors::ChunkRun>{{0, 10, 2}, {2, 12, 2}, {4, 14, 1}, {8, 20, 1}});
  CHECK(actors::plan_chunk_runs(copies, true, 1).size() == copies.size());
  CHECK(actors::plan_chunk_runs(copies, true) == std::vector<actors::ChunkRun>{{0, 10, 5}, {8, 20, 1}});
}

TEST_CASE("the swap engine's device streams see each layer's copies, then its event, D2H waits for the last H2D",
          "[swap][device_order]") {
  auto log = std::make_shared<DeviceLog>();
  auto device = std::make_shared<kv::KvPool>(small_pool(8));
  backend::KvTierLinks links;
  links.device = kv::tier_memory(*device);
  links.host = std::make_unique<kv::KvPool>(backend::host_tier_config(device->config(), 6));
  kv::KvPool& host = *links.host;
  links.copy_in = std::make_unique<FakeDeviceStream>(log, "h2d");
  links.copy_out = std::make_unique<FakeDeviceStream>(log, "d2h");
  links.owners.push_back(device);
  fill_pattern(*device, 1);
  fill_pattern(host, 2);
  const std::size_t slice = device->layer(0).block_bytes();
  REQUIRE(slice == 512);  // 4 tokens x 2 heads x 8 dims x K,V x 4 bytes

  asio::io_context io;
  rt::TaskGroup group;
  std::vector<actors::TransfersDone> reports;
  actors::SwapEngineConfig config;
  config.host_slots = 6;
  config.max_transfer_bytes = 2 * slice;
  config.report = [&](actors::TransfersDone d) { reports.push_back(std::move(d)); };
  actors::SwapEngine engine(std::move(links), group, io.get_executor(), std::move(config));

  auto [reply, pending] = rt::make_reply<actors::SwapTicket>(io.get_executor());
  actors::KvTransfers t;
  t.swap_in = {dh(0, 0), dh(1, 1), dh(2, 2)};  // host 0-2 -> device 0-2: a run of 2, then 1
  t.swap_out = {dh(5, 3), dh(6, 4)};           // device 5-6 -> host 3-4: one run of 2
  const std::vector<std::byte> out_src5 = copy_of(*device, 1, 5);
  engine(actors::SwapIteration{7, t, std::move(reply)});

  const std::vector<std::string> expected{
      "h2d copy swap_in 1024", "h2d copy swap_in 512", "h2d record e1",   // layer 0
      "h2d copy swap_in 1024", "h2d copy swap_in 512", "h2d record e2",   // layer 1
      "h2d copy swap_in 1024", "h2d copy swap_in 512", "h2d record e3",   // layer 2
      "d2h wait e3",                                                     // after every H2D
      "d2h copy swap_out 1024", "d2h record e4",
      "d2h copy swap_out 1024", "d2h record e5",
      "d2h copy swap_out 1024", "d2h record e6",
      "d2h record e7",  // what the swap-out report waits for
  };
  CHECK(log->snapshot() == expected);
  // The bytes moved (the fake copies at once).
  for (std::int32_t l = 0; l < 3; ++l) {
    for (std::uint32_t b = 0; b < 3; ++b) CHECK(copy_of(*device, l, b) == copy_of(host, l, b));
  }
  CHECK(copy_of(host, 1, 3) == out_src5);

  // The swap-out is reported once its event completes on the device, not before.
  io.run();
  CHECK(reports.empty());
  log->complete_all();
  io.restart();
  io.run();
  REQUIRE(reports.size() == 1);
  REQUIRE(reports[0].swap_out.size() == 2);
  CHECK(reports[0].swap_out[0].device.value == 5);
  CHECK(reports[0].swap_out[1].host.value == 4);
}

TEST_CASE("a backend that waits on the device gets layer l's swap-in event just before layer l, the worker never blocks",
          "[swap][device_order]") {
  auto log = std::make_shared<DeviceLog>();
  const kv::KvPoolConfig pool = small_pool(8);
  // Three layer events of a copy stream, still pending on the "device".
  std::vector<rt::Event> ready;
  for (int l = 0; l < 3; ++l) ready.push_back(log->record("h2d"));
  // Before the worker, so that it outlives the worker's stream threads: an
  // event they complete posts its waiter here (TSan saw the context torn
  // down under such a post when it was declared after the worker).
  asio::io_context io;
  actors::GpuWorker worker(std::make_unique<GatedForward>(log, pool),
                           actors::GpuWorkerConfig{pool, model::VocabInfo{8, {}}, nullptr, {}, 0});
  actors::IterationPlan plan;
  plan.index = 1;
  plan.copies.push_back({kv::BlockId{1}, kv::BlockId{2}, 3});
  actors::PlannedSequence seq;
  seq.turn = actors::TurnId{1};
  seq.tokens = {5, 6};
  seq.blocks = {kv::BlockId{0}};
  plan.sequences.push_back(seq);

  auto [reply, pending] = rt::make_reply<actors::BatchOutcome>(io.get_executor());
  auto done = asio::co_spawn(io, worker(actors::RunBatch{std::move(plan), std::move(reply), ready}), asio::use_future);
  io.run_for(std::chrono::seconds(20));
  // Finished while every event is still pending: nothing waited on the host.
  REQUIRE(done.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
  done.get();
  log->complete_all();
  const std::vector<std::string> expected{
      "h2d record e1",     "h2d record e2", "h2d record e3",
      "compute wait e3",   "compute copy_prefix 1->2",  // a copy-on-write reads every layer of its source
      "compute wait e1",   "compute layer 0",
      "compute wait e2",   "compute layer 1",
      "compute wait e3",   "compute layer 2",
  };
  CHECK(log->snapshot() == expected);
}

namespace {

// One swap iteration over fake device streams and the fake gather kernel;
// returns the device log and checks that every chunk's bytes moved, every
// layer. The device pool has 16 blocks, the host tier 12 slots, 3 layers of
// 512-byte slices.
std::vector<std::string> gathered_swap(const actors::KvTransfers& t, const kernels::SwapCopyThresholds& thresholds,
                                       bool gather_kernel) {
  auto log = std::make_shared<DeviceLog>();
  auto device = std::make_shared<kv::KvPool>(small_pool(16));
  backend::KvTierLinks links;
  links.device = kv::tier_memory(*device);
  links.host = std::make_unique<kv::KvPool>(backend::host_tier_config(device->config(), 12));
  kv::KvPool& host = *links.host;
  links.copy_in = std::make_unique<FakeDeviceStream>(log, "h2d");
  links.copy_out = std::make_unique<FakeDeviceStream>(log, "d2h");
  links.gather = std::make_unique<FakeGather>(log);
  links.thresholds = thresholds;
  links.owners.push_back(device);
  fill_pattern(*device, 1);
  fill_pattern(host, 2);
  std::vector<std::vector<std::byte>> out_src;
  for (const DeviceHostCopy& c : t.swap_out) {
    for (std::int32_t l = 0; l < 3; ++l) out_src.push_back(copy_of(*device, l, c.device.value));
  }

  asio::io_context io;
  rt::TaskGroup group;
  actors::SwapEngineConfig config;
  config.host_slots = 12;
  config.gather_kernel = gather_kernel;
  actors::SwapEngine engine(std::move(links), group, io.get_executor(), std::move(config));
  auto [reply, pending] = rt::make_reply<actors::SwapTicket>(io.get_executor());
  engine(actors::SwapIteration{3, t, std::move(reply)});
  for (const DeviceHostCopy& c : t.swap_in) {
    for (std::int32_t l = 0; l < 3; ++l) CHECK(copy_of(*device, l, c.device.value) == copy_of(host, l, c.host.value));
  }
  std::size_t i = 0;
  for (const DeviceHostCopy& c : t.swap_out) {
    for (std::int32_t l = 0; l < 3; ++l) CHECK(copy_of(host, l, c.host.value) == out_src[i++]);
  }
  log->complete_all();
  io.run();
  return log->snapshot();
}

}  // namespace

TEST_CASE("a swap of scattered small chunks is one gather launch per layer pass, before that layer's event",
          "[swap][device_order]") {
  actors::KvTransfers t;
  t.swap_in = {dh(1, 0), dh(3, 2), dh(5, 4), dh(7, 6)};    // nothing adjacent: 4 runs of 512 bytes
  t.swap_out = {dh(9, 1), dh(11, 3), dh(13, 5), dh(15, 7)};
  const std::vector<std::string> gathered{
      "h2d gather swap_in 4 runs 2048",  "h2d record e1",
      "h2d gather swap_in 4 runs 2048",  "h2d record e2",
      "h2d gather swap_in 4 runs 2048",  "h2d record e3",
      "d2h wait e3",
      "d2h gather swap_out 4 runs 2048", "d2h record e4",
      "d2h gather swap_out 4 runs 2048", "d2h record e5",
      "d2h gather swap_out 4 runs 2048", "d2h record e6",
      "d2h record e7",
  };
  CHECK(gathered_swap(t, {}, true) == gathered);

  // The kernel off: the same runs, one DMA copy each.
  std::vector<std::string> copies;
  for (int l = 0; l < 3; ++l) {
    for (int r = 0; r < 4; ++r) copies.push_back("h2d copy swap_in 512");
    copies.push_back("h2d record e" + std::to_string(l + 1));
  }
  copies.push_back("d2h wait e3");
  for (int l = 0; l < 3; ++l) {
    for (int r = 0; r < 4; ++r) copies.push_back("d2h copy swap_out 512");
    copies.push_back("d2h record e" + std::to_string(l + 4));
  }
  copies.push_back("d2h record e7");
  CHECK(gathered_swap(t, {}, false) == copies);

  // Fewer small runs than a launch pays for: DMA copies, the gather present.
  actors::KvTransfers few;
  few.swap_in = {dh(1, 0), dh(3, 2), dh(5, 4)};
  const std::vector<std::string> three = gathered_swap(few, {}, true);
  CHECK(std::count(three.begin(), three.end(), "h2d copy swap_in 512") == 9);
  CHECK(std::none_of(three.begin(), three.end(), [](const std::string& s) { return s.find("gather") != s.npos; }));
}

TEST_CASE("a swap of large adjacent chunks is DMA copies, with the small scattered rest in one gather launch",
          "[swap][device_order]") {
  const kernels::SwapCopyThresholds large_from_two_chunks{.min_dma_bytes = 1024, .min_gather_spans = 4};
  actors::KvTransfers adjacent;
  adjacent.swap_in = {dh(0, 0), dh(1, 1), dh(2, 2), dh(3, 3)};  // one run of 4 chunks
  adjacent.swap_out = {dh(8, 6), dh(9, 7)};                     // one run of 2
  const std::vector<std::string> dma{
      "h2d copy swap_in 2048",  "h2d record e1", "h2d copy swap_in 2048",  "h2d record e2",
      "h2d copy swap_in 2048",  "h2d record e3", "d2h wait e3",
      "d2h copy swap_out 1024", "d2h record e4", "d2h copy swap_out 1024", "d2h record e5",
      "d2h copy swap_out 1024", "d2h record e6", "d2h record e7",
  };
  CHECK(gathered_swap(adjacent, large_from_two_chunks, true) == dma);

  actors::KvTransfers mixed;
  mixed.swap_in = {dh(0, 0), dh(1, 1), dh(4, 3), dh(6, 5), dh(8, 7), dh(10, 9)};  // a run of 2, 4 scattered
  std::vector<std::string> expected;
  for (int l = 0; l < 3; ++l) {
    expected.push_back("h2d copy swap_in 1024");
    expected.push_back("h2d gather swap_in 4 runs 2048");
    expected.push_back("h2d record e" + std::to_string(l + 1));
  }
  CHECK(gathered_swap(mixed, large_from_two_chunks, true) == expected);
}
