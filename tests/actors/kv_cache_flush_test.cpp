// KvCacheManager::flush_to_disk, the KV cache's side of a clean exit: the
// idle paths' device-only chunks pass through the host tier to disk, the
// most recently active conversation first and each from its first chunk,
// one step per round of reported moves, until every chunk has a disk copy
// or the disk is full.
#include "actors/kv_cache_manager.hpp"

#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

using namespace pensieve;
using namespace pensieve::actors;
using kv::DiskSlot;

namespace {

std::vector<std::int32_t> token_run(std::size_t n, std::int32_t first) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Conversation 1 (4 tokens, active at 10) and 2 (3 tokens, active at 20),
// both of namespace "t", on the device only; one host slot.
KvCacheManager two_conversations(std::int32_t disk_slots) {
  KvCacheOptions o;
  o.swap_out_watermark = 0.0;
  KvCacheManager kv({.num_blocks = 8, .block_tokens = 2, .host_slots = 1, .disk_slots = disk_slots}, o);
  std::vector<kv::BlockId> freed;
  for (const auto& [id, n, at] : {std::tuple{1, 4, 10}, std::tuple{2, 3, 20}}) {
    kv::BlockTable table(kv.block_tokens());
    REQUIRE(kv.append(table, n).has_value());
    kv.put(ConversationId{std::uint64_t(id)}, token_run(std::size_t(n), 100 * id), std::move(table), at, freed,
           std::nullopt, std::string("t"));
  }
  return kv;
}

// Steps until done, reporting every move at once; the spills in order.
std::vector<HostDiskCopy> flush_all(KvCacheManager& kv, KvFlushStep& last, int& steps) {
  std::vector<HostDiskCopy> spills;
  std::vector<kv::BlockId> freed;
  for (steps = 1; steps < 50; ++steps) {
    KvTransfers out;
    last = kv.flush_to_disk(30, out);
    spills.insert(spills.end(), out.spill.begin(), out.spill.end());
    if (last.done()) break;
    kv.transfers_done({.swap_out = out.swap_out, .spill = out.spill}, freed);
  }
  CHECK(freed.empty());  // nothing leaves the device
  return spills;
}

}  // namespace

TEST_CASE("a flush writes the most recent conversation first, each from its first chunk, through one host slot",
          "[kv_cache][flush]") {
  KvCacheManager kv = two_conversations(8);
  KvTransfers first;
  const KvFlushStep step = kv.flush_to_disk(30, first);
  // Conversation 2's first chunk takes the host slot; the other three wait for it.
  REQUIRE(first.swap_out.size() == 1);
  CHECK(first.swap_out[0].device == kv::BlockId{2});
  CHECK(first.swap_out[0].host == HostSlot{0});
  CHECK(step.started == 1);
  CHECK(step.waiting == 3);
  CHECK(step.left == 0);
  std::vector<kv::BlockId> freed;
  kv.transfers_done({.swap_out = first.swap_out}, freed);

  KvFlushStep last;
  int steps = 0;
  const std::vector<HostDiskCopy> spills = flush_all(kv, last, steps);
  CHECK(last.left == 0);
  CHECK(steps == 8);  // per chunk: a swap-out step and a spill step; then the done one
  REQUIRE(spills.size() == 4);
  const std::vector<std::vector<std::int32_t>> order{{200, 201}, {202}, {100, 101}, {102, 103}};
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(spills[i].tokens == order[i]);
    CHECK(spills[i].disk == DiskSlot{std::uint32_t(i)});
    CHECK(spills[i].label.ns == "t");
    CHECK(spills[i].label.block_index == std::uint32_t(i % 2));
  }
  for (std::uint64_t c : {1, 2}) {
    for (const ChunkView& v : kv.chunks(ConversationId{c})) {
      CHECK(v.tier == ChunkTier::device);  // still there, now with a disk copy
      CHECK(v.disk.has_value());
    }
  }
  KvTransfers again;
  CHECK(kv.flush_to_disk(40, again).done());
  CHECK(again.empty());
}

TEST_CASE("a flush that fills the disk stops a path at its first chunk with no room and counts the rest as left",
          "[kv_cache][flush]") {
  KvCacheManager kv = two_conversations(3);
  KvFlushStep last;
  int steps = 0;
  const std::vector<HostDiskCopy> spills = flush_all(kv, last, steps);
  REQUIRE(spills.size() == 3);
  CHECK(spills[2].tokens == std::vector<std::int32_t>{100, 101});
  CHECK(last.left == 1);  // conversation 1's second chunk: every disk slot holds a chunk that is also on the device
  CHECK(kv.chunks(ConversationId{1})[1].disk == std::nullopt);
}
