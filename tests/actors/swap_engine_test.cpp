// The swap engine moves exact bytes between the tiers, layer by layer, in
// the order the contract gives (swap_in, then swap_out, then the disk; a
// swap-out never holds up a later swap-in),
// signals one event per layer in layer order, and reports what finished.
#include "actors/disk_tier.hpp"
#include "actors/kv_copy_plan.hpp"
#include "gpu/kernels/cpu/reshape_and_cache.hpp"
#include "tests/actors/swap_rig.hpp"
#include "tests/temp_dir.hpp"

#include <fstream>
#include <numeric>

using namespace pensieve;
using namespace pensieve::testing;
using actors::DeviceHostCopy;
using actors::HostSlot;
using actors::KvTransfers;

namespace {

DeviceHostCopy dh(std::uint32_t device, std::uint32_t host) { return {kv::BlockId{device}, HostSlot{host}}; }

// A gate the copy stream's hook waits on, opened layer by layer by the test.
struct LayerGate {
  std::mutex mutex;
  std::condition_variable changed;
  std::int32_t open_through = -1;
  void open(std::int32_t layer) {
    std::lock_guard lock(mutex);
    open_through = layer;
    changed.notify_all();
  }
  void pass(std::int32_t layer) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return open_through >= layer; });
  }
};

}  // namespace

TEST_CASE("copies of adjacent chunks are gathered into one transfer only when asked", "[swap]") {
  const std::vector<actors::SlotCopy> copies{{5, 1}, {2, 7}, {3, 8}, {4, 9}, {6, 2}, {9, 4}};
  CHECK(actors::plan_chunk_runs(copies, false) ==
        std::vector<actors::ChunkRun>{{5, 1, 1}, {2, 7, 1}, {3, 8, 1}, {4, 9, 1}, {6, 2, 1}, {9, 4, 1}});
  // Sorted by source: 2-4 -> 7-9 is one run; 5 -> 1 and 6 -> 2 continue too.
  CHECK(actors::plan_chunk_runs(copies, true) ==
        std::vector<actors::ChunkRun>{{2, 7, 3}, {5, 1, 2}, {9, 4, 1}});
}

TEST_CASE("swap_in copies each chunk's every layer from host to device, byte for byte, and nothing else",
          "[swap]") {
  const bool gather = GENERATE(false, true);
  INFO("gather " << gather);
  actors::SwapEngineConfig config;
  config.gather = gather;
  SwapRig rig(8, 6, config);
  fill_pattern(*rig.device, 1);
  fill_pattern(*rig.host, 2);
  const kv::KvPool before_device = [&] {
    kv::KvPool p(rig.device->config());
    for (std::int32_t l = 0; l < 3; ++l) {
      for (std::uint32_t b = 0; b < 8; ++b) std::memcpy(slice_of(p, l, b).data(), slice_of(*rig.device, l, b).data(), slice_of(p, l, b).size());
    }
    return p;
  }();
  // Host 1, 2, 3 -> device 4, 5, 6 (adjacent on both sides) and host 5 -> device 0.
  KvTransfers t;
  t.swap_in = {dh(4, 1), dh(5, 2), dh(6, 3), dh(0, 5)};
  auto ticket = rig.submit(t);
  REQUIRE(ticket.layer_ready.size() == 3);
  ticket.layer_ready.back().wait_blocking();
  for (std::int32_t l = 0; l < 3; ++l) {
    for (const auto& c : t.swap_in) {
      CHECK(copy_of(*rig.device, l, c.device.value) == copy_of(*rig.host, l, c.host.value));
    }
    for (std::uint32_t b : {1u, 2u, 3u, 7u}) CHECK(copy_of(*rig.device, l, b) == copy_of(before_device, l, b));
  }
  const auto stats = rig.stats();
  CHECK(stats.swap_in_chunks == 4);
  CHECK(stats.swap_in_bytes == 4 * 3 * std::int64_t(slice_of(*rig.host, 0, 0).size()));
  CHECK(stats.copy_runs == (gather ? 2 : 4) * 3);
}

TEST_CASE("swap_in's per-layer events complete one layer at a time, in layer order", "[swap]") {
  LayerGate gate;
  actors::SwapEngineConfig config;
  config.before_copy_layer = [&](std::string_view, std::int32_t layer) { gate.pass(layer); };
  SwapRig rig(8, 6, config);
  fill_pattern(*rig.host, 3);
  KvTransfers t;
  t.swap_in = {dh(0, 0), dh(3, 1)};
  // The reply comes while every copy is still held at the gate: nothing
  // in the engine waits for a copy.
  auto ticket = rig.submit(t);
  REQUIRE(ticket.layer_ready.size() == 3);
  std::mutex order_mutex;
  std::condition_variable order_changed;
  std::vector<std::int32_t> order;
  for (std::int32_t l = 0; l < 3; ++l) {
    CHECK_FALSE(ticket.layer_ready[std::size_t(l)].is_complete());
    ticket.layer_ready[std::size_t(l)].on_complete([&, l] {
      std::lock_guard lock(order_mutex);
      order.push_back(l);
      order_changed.notify_all();
    });
  }
  for (std::int32_t l = 0; l < 3; ++l) {
    gate.open(l);
    ticket.layer_ready[std::size_t(l)].wait_blocking();
    // Layer l has landed, the next one has not (its copy waits at the gate).
    CHECK(copy_of(*rig.device, l, 3) == copy_of(*rig.host, l, 1));
    if (l + 1 < 3) CHECK_FALSE(ticket.layer_ready[std::size_t(l) + 1].is_complete());
  }
  // Continuations run just after the event is marked complete: wait for them.
  std::unique_lock lock(order_mutex);
  REQUIRE(order_changed.wait_for(lock, std::chrono::seconds(60), [&] { return order.size() == 3; }));
  CHECK(order == std::vector<std::int32_t>{0, 1, 2});
}

TEST_CASE("a swapped-out chunk is reported, and reads back the same after its device block was reused",
          "[swap]") {
  SwapRig rig(8, 6);
  fill_pattern(*rig.device, 4);
  std::vector<std::vector<std::byte>> original;
  for (std::int32_t l = 0; l < 3; ++l) original.push_back(copy_of(*rig.device, l, 2));
  KvTransfers out;
  out.swap_out = {dh(2, 5)};
  CHECK(rig.submit(out).layer_ready.empty());
  const auto done = rig.wait_report(1);
  REQUIRE(done.swap_out.size() == 1);
  CHECK(done.swap_out[0].device.value == 2);
  CHECK(done.swap_out[0].host.value == 5);
  // The device block goes to someone else...
  for (std::int32_t l = 0; l < 3; ++l) std::memset(slice_of(*rig.device, l, 2).data(), 0x5a, slice_of(*rig.device, l, 2).size());
  // ...and the chunk comes back into another one.
  KvTransfers in;
  in.swap_in = {dh(7, 5)};
  auto ticket = rig.submit(in);
  ticket.layer_ready.back().wait_blocking();
  for (std::int32_t l = 0; l < 3; ++l) CHECK(copy_of(*rig.device, l, 7) == original[std::size_t(l)]);
  const auto stats = rig.stats();
  CHECK(stats.swap_out_chunks == 1);
  CHECK(stats.swap_in_chunks == 1);
}

TEST_CASE("within one iteration host-to-device copies run before device-to-host ones", "[swap]") {
  SwapRig rig(8, 6);
  fill_pattern(*rig.device, 5);
  fill_pattern(*rig.host, 6);
  const auto arriving = copy_of(*rig.host, 1, 0);
  // Block 3 is both filled from host 0 and copied out to host 4: host 4
  // must get what arrived, not what block 3 held before.
  KvTransfers t;
  t.swap_out = {dh(3, 4)};
  t.swap_in = {dh(3, 0)};
  rig.submit(t);
  rig.wait_report(1);
  CHECK(copy_of(*rig.host, 1, 4) == arriving);
}

TEST_CASE("spill and restore move chunks through the disk store, a corrupted chunk is reported, not restored",
          "[swap][disk]") {
  TempDir dir("swap-disk");
  SwapRig rig(8, 6, {}, dir.path().string(), 1 << 20);
  CHECK(rig.stats().disk_slots > 4);
  fill_pattern(*rig.host, 7);
  std::vector<std::vector<std::byte>> first, second;
  for (std::int32_t l = 0; l < 3; ++l) {
    first.push_back(copy_of(*rig.host, l, 1));
    second.push_back(copy_of(*rig.host, l, 2));
  }
  const std::vector<std::int32_t> tokens_a{10, 11, 12, 13}, tokens_b{20, 21, 22, 23};
  KvTransfers spill;
  spill.spill = {{HostSlot{1}, actors::DiskSlot{3}, tokens_a}, {HostSlot{2}, actors::DiskSlot{0}, tokens_b}};
  rig.submit(spill);
  const auto spilled = rig.wait_report(1);
  CHECK(spilled.spill.size() == 2);
  CHECK(spilled.spill_failed.empty());

  KvTransfers restore;
  restore.restore = {{HostSlot{4}, actors::DiskSlot{3}, tokens_a}, {HostSlot{5}, actors::DiskSlot{0}, tokens_b}};
  rig.submit(restore);
  const auto restored = rig.wait_report(2);
  CHECK(restored.restored.size() == 2);
  CHECK(restored.corrupt.empty());
  for (std::int32_t l = 0; l < 3; ++l) {
    CHECK(copy_of(*rig.host, l, 4) == first[std::size_t(l)]);
    CHECK(copy_of(*rig.host, l, 5) == second[std::size_t(l)]);
  }

  // Asked back for other tokens: not this chunk.
  KvTransfers wrong;
  wrong.restore = {{HostSlot{4}, actors::DiskSlot{3}, tokens_b}};
  rig.submit(wrong);
  const auto mismatched = rig.wait_report(3);
  CHECK(mismatched.restored.empty());
  CHECK(mismatched.corrupt.size() == 1);

  // Flip one byte in every 4 KiB block of the chunk file: every slot's
  // header (it starts each slot, on a 4 KiB boundary) is damaged.
  {
    const auto path = dir / "kv-chunks.bin";
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.is_open());
    const auto size = std::filesystem::file_size(path);
    REQUIRE(size > 0);
    for (std::uint64_t at = 8; at < size; at += 4096) {
      f.seekg(std::streamoff(at));
      char c = 0;
      f.read(&c, 1);
      c = char(c ^ 0x40);
      f.seekp(std::streamoff(at));
      f.write(&c, 1);
    }
  }
  KvTransfers damaged;
  damaged.restore = {{HostSlot{4}, actors::DiskSlot{3}, tokens_a}};
  rig.submit(damaged);
  const auto corrupt = rig.wait_report(4);
  CHECK(corrupt.restored.empty());
  REQUIRE(corrupt.corrupt.size() == 1);
  CHECK(corrupt.corrupt[0].disk.value == 3);
  const auto stats = rig.stats();
  CHECK(stats.spill_chunks == 2);
  CHECK(stats.restore_chunks == 2);
  CHECK(stats.restore_corrupt == 2);
}

TEST_CASE("a Q8_0 chunk goes device, host, disk, host, device byte for byte", "[swap][disk][q8_0]") {
  TempDir dir("swap-q8");
  SwapRig rig(8, 6, {}, dir.path().string(), 1 << 20, kv::KvDType::q8_0);
  REQUIRE(rig.device->config().dtype == kv::KvDType::q8_0);
  REQUIRE(rig.host->config().dtype == kv::KvDType::q8_0);
  // Real quantised K/V in device block 2 (slots 8..11), every layer.
  std::vector<float> k(4 * 96), v(4 * 96);
  for (std::size_t i = 0; i < k.size(); ++i) {
    k[i] = float(int(i * 37 % 101) - 50) * 0.031f;
    v[i] = float(int(i * 53 % 89) - 44) * 0.7f;
  }
  const std::vector<std::int64_t> slots{8, 9, 10, 11};
  for (std::int32_t l = 0; l < 3; ++l) {
    kernels::cpu::reshape_and_cache({k.data(), v.data(), kv::KvDType::f32, slots.data(), 4, rig.device->layer(l)});
  }
  std::vector<std::vector<std::byte>> original;
  for (std::int32_t l = 0; l < 3; ++l) {
    original.push_back(copy_of(*rig.device, l, 2));
    CHECK(original.back().size() == 2 * 4 * (66 + 34));  // K and V of 4 tokens, blocks of 64 and 32 values
  }
  KvTransfers out;
  out.swap_out = {dh(2, 1)};
  rig.submit(out);
  rig.wait_report(1);
  for (std::int32_t l = 0; l < 3; ++l) CHECK(copy_of(*rig.host, l, 1) == original[std::size_t(l)]);
  const std::vector<std::int32_t> tokens{1, 2, 3, 4};
  KvTransfers spill;
  spill.spill = {{HostSlot{1}, actors::DiskSlot{2}, tokens}};
  rig.submit(spill);
  CHECK(rig.wait_report(2).spill.size() == 1);
  KvTransfers restore;
  restore.restore = {{HostSlot{4}, actors::DiskSlot{2}, tokens}};
  rig.submit(restore);
  const auto restored = rig.wait_report(3);
  CHECK(restored.restored.size() == 1);
  CHECK(restored.corrupt.empty());
  KvTransfers in;
  in.swap_in = {dh(6, 4)};
  rig.submit(in).layer_ready.back().wait_blocking();
  for (std::int32_t l = 0; l < 3; ++l) {
    CHECK(copy_of(*rig.host, l, 4) == original[std::size_t(l)]);
    CHECK(copy_of(*rig.device, l, 6) == original[std::size_t(l)]);
  }
}

TEST_CASE("a swap-out still copying does not delay a later iteration's swap-in", "[swap]") {
  LayerGate out_gate;  // holds the swap-out at its first layer until the swap-in has landed
  actors::SwapEngineConfig config;
  config.before_copy_layer = [&](std::string_view direction, std::int32_t layer) {
    if (direction == "swap_out") out_gate.pass(layer);
  };
  SwapRig rig(8, 6, config);
  fill_pattern(*rig.device, 5);
  fill_pattern(*rig.host, 6);
  const auto arriving = copy_of(*rig.host, 2, 1);
  KvTransfers out;
  out.swap_out = {dh(2, 0)};
  rig.submit(out);
  KvTransfers in;
  in.swap_in = {dh(4, 1)};
  const auto ticket = rig.submit(in);
  REQUIRE(ticket.layer_ready.size() == 3);
  std::mutex mutex;
  std::condition_variable changed;
  bool landed = false;
  ticket.layer_ready.back().on_complete([&] {
    std::lock_guard lock(mutex);
    landed = true;
    changed.notify_all();
  });
  {
    std::unique_lock lock(mutex);
    // A generous bound, only against a hang: with one stream it never lands.
    CHECK(changed.wait_for(lock, std::chrono::seconds(30), [&] { return landed; }));
  }
  CHECK(copy_of(*rig.device, 2, 4) == arriving);
  {
    std::lock_guard lock(rig.mutex);
    CHECK(rig.reports.empty());  // the swap-out is still held
  }
  out_gate.open(2);
  const auto done = rig.wait_report(1);
  CHECK(done.swap_out.size() == 1);
}
