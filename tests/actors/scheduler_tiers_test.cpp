// SchedulerCore with host and disk tiers, step by step against a fake swap
// engine that simulates every tier's KV cell by cell (tier_rig.hpp): chunks
// move device -> host -> disk -> dropped, returning conversations get their
// chunks swapped in, restored or recomputed, and every KV read is exact.
#include "tests/actors/tier_rig.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

using namespace pensieve;
using namespace pensieve::actors;
using namespace pensieve::testing;

namespace {

int rank(ChunkTier t) {
  switch (t) {
    case ChunkTier::device: return 0;
    case ChunkTier::host: return 1;
    case ChunkTier::disk: return 2;
    case ChunkTier::restoring: return 2;
    case ChunkTier::dropped: return 3;
  }
  return 3;
}

const PlannedSequence* find(const IterationPlan& plan, TurnId turn) {
  for (const auto& p : plan.sequences) {
    if (p.turn == turn) return &p;
  }
  return nullptr;
}

// Steps until `turn` is planned; returns that plan (and the ones before).
std::vector<IterationPlan> until_planned(TierRig& rig, TurnId turn, int max_steps = 20) {
  std::vector<IterationPlan> plans;
  for (int i = 0; i < max_steps; ++i) {
    plans.push_back(rig.step());
    if (find(plans.back(), turn)) return plans;
  }
  FAIL("the turn was never planned");
  return plans;
}

int started_cached(const TierRig& rig, TurnId turn) {
  for (const auto& e : rig.events) {
    if (const auto* s = std::get_if<TurnStarted>(&e.event); s && e.turn == turn)
      return s->cached_tokens;
  }
  return -1;
}

void check_exact_kv(const TierRig& rig) {
  CHECK(rig.swap.checked_reads() > 0);
  CHECK(rig.swap.stale_reads() == 0);
  CHECK(rig.swap.conflicts() == 0);
}

// Conversation 1's three full chunks end up host, device, device: the first
// copied out under pressure, the others copied ahead of time (clean).
TierRig host_device_device(TurnId& first) {
  TierRig rig(tiny_tiers(8, 8, 0));
  first = rig.run_turn(1, token_run(11, 10), 2);  // 12 tokens fed: 3 chunks
  rig.run_turn(2, token_run(11, 100), 2);
  rig.run_turn(3, token_run(11, 200), 2);
  return rig;
}

}  // namespace

TEST_CASE("with tiny tier budgets chunks move device, host, disk, dropped, and every KV read stays exact",
          "[scheduler][tiers]") {
  TierRig rig(tiny_tiers(8, 4, 4));
  std::map<std::pair<std::uint64_t, std::size_t>, std::vector<ChunkTier>> seen;
  for (std::uint64_t c = 1; c <= 6; ++c) {
    rig.admit(c, token_run(10, std::int32_t(100 * c)), 2);
    while (rig.core.has_work() || !rig.swap.idle()) {
      rig.step();
      for (std::uint64_t k = 1; k <= c; ++k) {
        const auto tiers = rig.tiers(k);
        for (std::size_t i = 0; i < tiers.size(); ++i) {
          auto& h = seen[{k, i}];
          if (h.empty() || h.back() != tiers[i]) h.push_back(tiers[i]);
        }
      }
    }
  }
  // Each chunk only ever moves down (no conversation came back), and some
  // went all the way.
  bool full_path = false;
  for (const auto& [chunk, history] : seen) {
    INFO("conversation " << chunk.first << " chunk " << chunk.second);
    for (std::size_t i = 1; i < history.size(); ++i) CHECK(rank(history[i - 1]) < rank(history[i]));
    full_path = full_path || history == std::vector<ChunkTier>{ChunkTier::device, ChunkTier::host,
                                                               ChunkTier::disk, ChunkTier::dropped};
  }
  CHECK(full_path);
  const TierStats s = rig.core.stats().tiers;
  CHECK(s.swap_out_chunks > 0);
  CHECK(s.spill_chunks > 0);
  CHECK(s.device_reclaimed > 0);
  CHECK(s.host_reclaimed > 0);
  CHECK(s.device_dropped + s.host_dropped + s.disk_dropped > 0);
  CHECK(s.free_host_slots <= s.host_slots);
  check_exact_kv(rig);
}

TEST_CASE("a returning conversation's host chunk is swapped in with its first chunk, with exact hits per tier",
          "[scheduler][tiers]") {
  TurnId first;
  TierRig rig = host_device_device(first);
  REQUIRE(rig.tiers(1) == std::vector<ChunkTier>{ChunkTier::host, ChunkTier::device, ChunkTier::device});
  const HostSlot slot = *rig.core.cached_chunks(ConversationId{1})[0].host;
  const std::size_t swap_ins_before = rig.swap.swap_in_total();
  const auto tokens = rig.next_message(first, 4, 900);  // 13 in history + 4
  const TurnId back = rig.admit(1, tokens, 2);
  const auto plans = until_planned(rig, back);
  for (std::size_t i = 0; i + 1 < plans.size(); ++i) CHECK(plans[i].transfers.swap_in.empty());
  const IterationPlan& plan = plans.back();
  const PlannedSequence& p = *find(plan, back);
  REQUIRE(plan.transfers.swap_in.size() == 1);
  CHECK(plan.transfers.swap_in[0].host == slot);
  CHECK(plan.transfers.swap_in[0].device == p.blocks[0]);
  CHECK(p.start_pos == 12);
  CHECK(p.tokens == std::vector<std::int32_t>(tokens.begin() + 12, tokens.end()));
  CHECK(started_cached(rig, back) == 12);
  rig.run_to_end();
  const TierStats s = rig.core.stats().tiers;
  CHECK(s.hit_tokens_device == 8);
  CHECK(s.hit_tokens_host == 4);
  CHECK(s.hit_tokens_disk == 0);
  CHECK(s.recomputed_tokens == 0);
  CHECK(s.swap_in_chunks == 1);
  CHECK(rig.swap.swap_in_total() == swap_ins_before + 1);
  check_exact_kv(rig);
}

namespace {

// Conversation 1's chunks end up disk, disk, host.
TierRig disk_disk_host(TurnId& first) {
  TierRig rig(tiny_tiers(8, 4, 8));
  first = rig.run_turn(1, token_run(11, 100), 2);
  for (std::uint64_t c = 2; c <= 4; ++c) rig.run_turn(c, token_run(11, std::int32_t(100 * c)), 2);
  return rig;
}

}  // namespace

TEST_CASE("a conversation on disk is restored before its turn runs, then swapped in", "[scheduler][tiers]") {
  TurnId first;
  TierRig rig = disk_disk_host(first);
  REQUIRE(rig.tiers(1) == std::vector<ChunkTier>{ChunkTier::disk, ChunkTier::disk, ChunkTier::host});
  const auto tokens = rig.next_message(first, 4, 900);
  rig.auto_report = false;
  const TurnId back = rig.admit(1, tokens, 2);
  // Nothing reported: the turn waits however many iterations pass.
  std::size_t restores = 0;
  for (int i = 0; i < 4; ++i) {
    const auto plan = rig.step();
    restores += plan.transfers.restore.size();
    CHECK_FALSE(find(plan, back));
  }
  CHECK(restores >= 1);
  CHECK(rig.core.stats().waiting == 1);
  // Reports come in (a spill that made host room among them): the restores
  // follow, then the turn runs with all three chunks swapped in.
  rig.auto_report = true;
  rig.core.transfers_done(rig.swap.report_all());
  const auto plans = until_planned(rig, back);
  const IterationPlan& plan = plans.back();
  CHECK(plan.transfers.swap_in.size() == 3);
  CHECK(find(plan, back)->start_pos == 12);
  CHECK(started_cached(rig, back) == 12);
  rig.run_to_end();
  const TierStats s = rig.core.stats().tiers;
  CHECK(s.restore_chunks == 2);
  CHECK(s.hit_tokens_disk == 8);
  CHECK(s.hit_tokens_host == 4);
  CHECK(s.recomputed_tokens == 0);
  CHECK(s.corrupt_chunks == 0);
  check_exact_kv(rig);
}

TEST_CASE("while the disk has room no chunk is dropped, though waiting turns' chunks fill the host",
          "[scheduler][tiers]") {
  // Six conversations return together, round after round: four run, the
  // others wait with their chunks attached, and the running ones need the
  // device blocks. Host slots are scarce (4), the disk holds everything
  // (64 slots for at most 36 chunks): room comes from spilling to disk
  // (waiting turns' host copies included), never from dropping KV.
  for (const auto policy : {EvictionPolicyKind::cost_aware, EvictionPolicyKind::lru}) {
    TierRig rig(tiny_tiers(8, 8, 64, policy));
    std::map<std::uint64_t, TurnId> last;
    std::map<TurnId, std::int64_t> history_before;
    for (int round = 0; round < 3; ++round) {
      for (std::uint64_t c = 1; c <= 6; ++c) {
        auto tokens = round == 0 ? token_run(10, std::int32_t(100 * c))
                                 : rig.next_message(last.at(c), 3, std::int32_t(1000 * round + 100 * c));
        const auto before = round == 0 ? 0 : std::int64_t(rig.history.at(last.at(c)).size()) - 1;
        last[c] = rig.admit(c, std::move(tokens), 2);
        history_before[last[c]] = before;
      }
      rig.run_to_end();
    }
    INFO("policy " << int(policy));
    const TierStats s = rig.core.stats().tiers;
    INFO("dropped: device busy/coldest/spilling " << s.device_dropped_host_busy << "/" << s.device_dropped_coldest
                                                  << "/" << s.device_dropped_spilling << ", restores given up "
                                                  << s.restores_given_up);
    CHECK(s.device_evicted_to_host + s.spill_chunks > 0);  // the tiers were under pressure
    CHECK(s.device_dropped == 0);
    CHECK(s.host_dropped == 0);
    CHECK(s.disk_dropped == 0);
    CHECK(s.recomputed_tokens == 0);
    // Every returning turn reused its whole history (all but the newest token).
    for (const auto& [turn, before] : history_before) CHECK(started_cached(rig, turn) == before);
    check_exact_kv(rig);
  }
}

TEST_CASE("a chunk that fails verification when read back from disk is recomputed from the history",
          "[scheduler][tiers]") {
  TurnId first;
  TierRig rig = disk_disk_host(first);
  REQUIRE(rig.tiers(1) == std::vector<ChunkTier>{ChunkTier::disk, ChunkTier::disk, ChunkTier::host});
  rig.swap.corrupt_disk.insert(rig.core.cached_chunks(ConversationId{1})[0].disk->value);
  const auto tokens = rig.next_message(first, 4, 900);
  const TurnId back = rig.admit(1, tokens, 2);
  const auto plans = until_planned(rig, back);
  // The corrupt chunk's tokens first, at their own positions...
  const PlannedSequence& hole = *find(plans.back(), back);
  CHECK(hole.start_pos == 0);
  CHECK(hole.tokens == std::vector<std::int32_t>(tokens.begin(), tokens.begin() + 4));
  CHECK_FALSE(hole.sample);
  // ...then the new message after the kept chunks.
  const auto next = until_planned(rig, back);
  CHECK(find(next.back(), back)->start_pos == 12);
  CHECK(started_cached(rig, back) == 8);
  rig.run_to_end();
  const TierStats s = rig.core.stats().tiers;
  CHECK(s.corrupt_chunks == 1);
  CHECK(s.recomputed_tokens == 4);
  CHECK(s.hit_tokens_disk == 4);
  CHECK(s.hit_tokens_host == 4);
  check_exact_kv(rig);
}

TEST_CASE("below the watermark idle chunks are copied out ahead of time, and a quick return pays nothing",
          "[scheduler][tiers]") {
  TierRig rig(tiny_tiers(8, 8, 0));  // watermark 25%: 2 blocks free or clean
  const TurnId first = rig.run_turn(1, token_run(11, 10), 2);  // 3 blocks
  const auto block0 = *rig.core.cached_chunks(ConversationId{1})[0].device;
  // A 15-token prompt takes 4 more: 1 block free, below the watermark.
  rig.admit(2, token_run(15, 100), 2);
  const auto plan = rig.step();
  REQUIRE(plan.sequences.size() == 1);
  REQUIRE(plan.transfers.swap_out.size() == 1);
  CHECK(plan.transfers.swap_out[0].device == block0);
  const auto chunk0 = rig.core.cached_chunks(ConversationId{1})[0];
  CHECK(chunk0.tier == ChunkTier::device);  // the device copy stays valid
  CHECK(chunk0.host == plan.transfers.swap_out[0].host);
  rig.run_to_end();
  // Conversation 1 returns before its blocks were needed: no copy back.
  rig.admit(1, rig.next_message(first, 4, 900), 2);
  rig.run_to_end();
  const TierStats s = rig.core.stats().tiers;
  CHECK(s.hit_tokens_device == 12);
  CHECK(s.hit_tokens_host == 0);
  CHECK(s.swap_in_chunks == 0);
  CHECK(rig.swap.swap_in_total() == 0);
  check_exact_kv(rig);
}

TEST_CASE("no block or slot is reused while a transfer still reads or writes it", "[scheduler][tiers]") {
  TierSetup l = tiny_tiers(10, 8, 24);
  TierRig rig(l);
  rig.auto_report = false;  // reports arrive every third iteration
  std::map<std::uint64_t, TurnId> last;
  int turns = 0, step = 0;
  for (int round = 0; round < 3; ++round) {
    for (std::uint64_t c = 1; c <= 8; c += 2) {
      for (std::uint64_t k : {c, c + 1}) {
        auto tokens = round == 0 ? token_run(6 + 2 * k, std::int32_t(100 * k)) : rig.next_message(last[k], 3, 900);
        last[k] = rig.admit(k, std::move(tokens), 3);
        ++turns;
      }
      for (int guard = 0; guard < 200 && rig.core.has_work(); ++guard) {
        rig.step();
        if (++step % 3 == 0) rig.core.transfers_done(rig.swap.report_all());
      }
      REQUIRE_FALSE(rig.core.has_work());
    }
  }
  int finished = 0;
  for (const auto& e : rig.events) finished += std::holds_alternative<TurnDone>(e.event) ? 1 : 0;
  CHECK(finished == turns);
  check_exact_kv(rig);
  const TierStats s = rig.core.stats().tiers;
  CHECK(s.swap_out_chunks > 0);
  CHECK(s.spill_chunks > 0);
  CHECK(s.restore_chunks > 0);
  CHECK(s.swap_in_chunks > 0);
  // Everything reported and forgotten: every slot of every tier is free.
  rig.core.transfers_done(rig.swap.report_all());
  for (std::uint64_t k = 1; k <= 8; ++k) rig.core.drop_conversation(ConversationId{k});
  rig.step();
  const SchedulerStats all = rig.core.stats();
  CHECK(all.free_blocks == l.sizes.num_blocks);
  CHECK(all.tiers.free_host_slots == l.sizes.host_slots);
  CHECK(all.tiers.free_disk_slots == l.sizes.disk_slots);
}

TEST_CASE("dropped leading chunks are recomputed by feeding exactly their tokens, the rest is used as is",
          "[scheduler][tiers]") {
  TierRig rig(tiny_tiers(6, 1, 0, EvictionPolicyKind::lru));
  const TurnId first = rig.run_turn(1, token_run(11, 10), 2);  // 3 chunks
  rig.run_turn(2, token_run(6, 100), 2);
  rig.run_turn(3, token_run(7, 200), 2);
  REQUIRE(rig.tiers(1) == std::vector<ChunkTier>{ChunkTier::dropped, ChunkTier::device, ChunkTier::device});
  const auto tokens = rig.next_message(first, 4, 900);  // 17 tokens, 12 cached
  const TurnId back = rig.admit(1, tokens, 2);
  std::vector<std::pair<std::int32_t, std::vector<std::int32_t>>> fed;
  for (const auto& plan : rig.run_to_end()) {
    if (const PlannedSequence* p = find(plan, back)) fed.emplace_back(p->start_pos, p->tokens);
  }
  REQUIRE(fed.size() == 3);
  CHECK(fed[0].first == 0);  // the hole, at its own positions
  CHECK(fed[0].second == std::vector<std::int32_t>(tokens.begin(), tokens.begin() + 4));
  CHECK(fed[1].first == 12);  // then on after the kept chunks
  CHECK(fed[1].second == std::vector<std::int32_t>(tokens.begin() + 12, tokens.end()));
  CHECK(fed[2].first == 17);  // the decode
  CHECK(rig.fed[back] == 4 + 5 + 1);
  CHECK(started_cached(rig, back) == 8);
  CHECK(rig.core.stats().tiers.recomputed_tokens == 4);
  check_exact_kv(rig);
}

namespace {

// Two conversations of 9 cached tokens (chunks of 4, 4 and 1) go idle
// together; a third turn needs 2 of their blocks while the host holds one
// chunk; then both come back.
std::int64_t recomputed_tokens(EvictionPolicyKind policy) {
  TierSetup l = tiny_tiers(7, 1, 0, policy);
  l.kv_cache.swap_out_watermark = 0.0;
  l.scheduler.decode_reserve = 0.0;
  TierRig rig(l);
  const TurnId a = rig.admit(1, token_run(8, 10), 2);
  const TurnId b = rig.admit(2, token_run(8, 100), 2);
  rig.run_to_end();
  rig.run_turn(3, token_run(11, 200), 2);
  rig.core.drop_conversation(ConversationId{3});
  rig.run_turn(1, rig.next_message(a, 2, 900), 2);
  rig.run_turn(2, rig.next_message(b, 2, 900), 2);
  check_exact_kv(rig);
  return rig.core.stats().tiers.recomputed_tokens;
}

}  // namespace

TEST_CASE("lru recomputes more tokens than cost-aware eviction when histories end in partly filled chunks",
          "[scheduler][tiers]") {
  // lru drops a full leading chunk (4 tokens to recompute); cost-aware the
  // one-token last chunk.
  CHECK(recomputed_tokens(EvictionPolicyKind::lru) == 4);
  CHECK(recomputed_tokens(EvictionPolicyKind::cost_aware) == 1);
}

TEST_CASE("without a host tier no transfer is ever planned and idle conversations are dropped whole",
          "[scheduler][tiers]") {
  TierRig rig(tiny_tiers(8, 0, 4));  // a disk tier alone is unused
  std::size_t transfers = 0;
  for (std::uint64_t c = 1; c <= 5; ++c) {
    rig.admit(c, token_run(10, std::int32_t(100 * c)), 2);
    for (const auto& plan : rig.run_to_end()) transfers += plan.transfers.empty() ? 0 : 1;
  }
  CHECK(transfers == 0);
  const SchedulerStats s = rig.core.stats();
  CHECK(s.evicted_conversations == 3);  // 8 blocks hold two conversations of 3
  CHECK(s.cached_conversations == 2);
  CHECK(s.tiers.disk_slots == 0);
  for (std::uint64_t c = 1; c <= 3; ++c) CHECK_FALSE(rig.core.cached_tokens(ConversationId{c}));
  check_exact_kv(rig);
}

TEST_CASE("a turn waiting for its restores does not hold up the turns behind it", "[scheduler][tiers]") {
  TurnId first;
  TierRig rig = disk_disk_host(first);
  REQUIRE(rig.tiers(1) == std::vector<ChunkTier>{ChunkTier::disk, ChunkTier::disk, ChunkTier::host});
  rig.auto_report = false;
  const TurnId back = rig.admit(1, rig.next_message(first, 4, 900), 2);
  const TurnId other = rig.admit(9, token_run(5, 40), 2);
  bool other_ran = false, back_ran = false;
  for (int i = 0; i < 4; ++i) {
    const auto plan = rig.step();
    other_ran = other_ran || find(plan, other);
    back_ran = back_ran || find(plan, back);
    rig.core.transfers_done(rig.swap.report(false));  // the restores stay in flight
  }
  CHECK(other_ran);
  CHECK_FALSE(back_ran);
  rig.auto_report = true;
  rig.core.transfers_done(rig.swap.report_all());
  rig.run_to_end();
  CHECK(started_cached(rig, back) == 12);
  check_exact_kv(rig);
}

TEST_CASE("with a host tier a new turn waits while admitting it would eat into the decode reserve",
          "[scheduler][tiers]") {
  for (const double reserve : {0.25, 0.0}) {
    TierSetup l = tiny_tiers(12, 4, 0);
    l.scheduler.decode_reserve = reserve;  // 3 of 12 blocks, or none
    TierRig rig(l);
    const TurnId decoding = rig.admit(1, token_run(4, 10), 12);
    rig.step();  // running, 1 block; 11 free
    // 33 tokens take 9 blocks: 2 would stay free, fewer than the reserve.
    const TurnId big = rig.admit(2, token_run(33, 100), 2);
    int big_first = -1, decoding_done = -1;
    for (int i = 0; i < 40 && rig.core.has_work(); ++i) {
      if (find(rig.step(), big) && big_first < 0) big_first = i;
      for (const auto& e : rig.events) {
        if (e.turn == decoding && std::holds_alternative<TurnDone>(e.event) && decoding_done < 0)
          decoding_done = i;
      }
    }
    INFO("decode_reserve " << reserve);
    REQUIRE(decoding_done >= 0);
    if (reserve > 0) {
      CHECK(big_first > decoding_done);  // not while the decode runs
    } else {
      CHECK(big_first == 0);
    }
    check_exact_kv(rig);
  }
}

TEST_CASE("a waiting turn that pins the only idle device chunks does not starve a running turn of blocks",
          "[scheduler][tiers]") {
  TierSetup l = tiny_tiers(8, 4, 0);
  l.kv_cache.swap_out_watermark = 0.0;  // no copies ahead of time: the idle chunks stay device-only
  l.scheduler.decode_reserve = 0.10;     // holds the waiting turn back while the running one decodes
  TierRig rig(l);
  const TurnId a = rig.run_turn(1, token_run(18, 100), 2);  // 20 tokens: 5 idle device blocks
  REQUIRE(rig.core.stats().free_blocks == 3);
  rig.admit(2, token_run(10, 300), 8);  // takes the 3 free blocks, then needs more to decode
  rig.step();
  rig.admit(1, rig.next_message(a, 4, 200), 2);  // pins conversation 1's chunks while it waits
  rig.run_to_end(200);  // before the fix: neither turn could ever run again
  CHECK(rig.generated[TurnId{a.value + 1}] == 8);
  CHECK(rig.generated[TurnId{a.value + 2}] == 2);
  check_exact_kv(rig);
}

TEST_CASE("a queued turn's device chunks go to the host when a running turn needs the room, and come back swapped in",
          "[scheduler][tiers]") {
  TierSetup l = tiny_tiers(8, 8, 0);
  l.kv_cache.swap_out_watermark = 0.0;  // nothing leaves ahead of time: only the running turn's need moves chunks
  l.scheduler.decode_reserve = 0.10;     // holds the queued turn back while the running one decodes
  TierRig rig(l);
  const TurnId a = rig.run_turn(1, token_run(18, 100), 2);  // 20 tokens: 5 idle device chunks
  rig.admit(2, token_run(10, 300), 8);                       // takes the 3 free blocks, then needs more
  rig.step();
  const TurnId back = rig.admit(1, rig.next_message(a, 4, 200), 2);  // attaches conversation 1's chunks
  bool left_device = false;
  for (int i = 0; i < 40 && !rig.generated.count(back); ++i) {
    rig.step();
    const auto tiers = rig.tiers(1);
    left_device = left_device || std::count(tiers.begin(), tiers.end(), ChunkTier::host) > 0;
  }
  rig.run_to_end(200);
  CHECK(left_device);
  CHECK(rig.generated[TurnId{a.value + 1}] == 8);
  CHECK(rig.generated[back] == 2);
  // Nothing was dropped: every cached token (18 fed, 1 decoded; the last
  // sample never fed) came back from the host or the device.
  CHECK(started_cached(rig, back) == 19);
  CHECK(rig.core.stats().tiers.recomputed_tokens == 0);
  CHECK(rig.core.stats().tiers.hit_tokens_host > 0);
  check_exact_kv(rig);
}

TEST_CASE("a preempted turn's KV goes to the host and it resumes computing no token twice", "[scheduler][tiers]") {
  for (const std::int32_t host : {8, 0}) {
    INFO("host slots " << host);
    TierSetup l = tiny_tiers(8, host, 0);
    l.kv_cache.swap_out_watermark = 0.0;
    l.scheduler.decode_reserve = 0.0;  // both turns start at once; their decodes then need 12 blocks of 8
    TierRig rig(l);
    const TurnId first = rig.admit(1, token_run(10, 100), 12);
    const TurnId later = rig.admit(2, token_run(10, 300), 12);
    rig.run_to_end(400);
    const SchedulerStats s = rig.core.stats();
    REQUIRE(s.preemptions > 0);
    CHECK(rig.generated[first] == 12);
    CHECK(rig.generated[later] == 12);
    // 10 prompt tokens and 11 sampled ones fed back: 21 each, unless recomputed.
    CHECK(rig.fed[first] == 21);
    if (host > 0) {
      CHECK(rig.fed[later] == 21);
      CHECK(s.tiers.recomputed_tokens == 0);
      CHECK(s.tiers.swap_out_chunks > 0);
      CHECK(s.tiers.hit_tokens_host > 0);
    } else {
      CHECK(rig.fed[later] > 21);  // without a host tier the preempted turn is recomputed
    }
    check_exact_kv(rig);
  }
}

TEST_CASE("without a host tier a conversation evicted whole counts its cached tokens as recomputed when it returns",
          "[scheduler][tiers]") {
  TierRig rig(tiny_tiers(8, 0, 0));
  const TurnId a = rig.run_turn(1, token_run(10, 100), 2);  // 11 tokens cached (the last sample is never fed)
  rig.run_turn(2, token_run(10, 200), 2);
  rig.run_turn(3, token_run(10, 300), 2);  // 3 blocks each: conversation 1, the coldest, goes
  REQUIRE_FALSE(rig.core.cached_tokens(ConversationId{1}));
  CHECK(rig.core.stats().tiers.recomputed_tokens == 0);
  const TurnId back = rig.run_turn(1, rig.next_message(a, 4, 900), 2);
  CHECK(rig.core.stats().tiers.recomputed_tokens == 11);
  CHECK(rig.fed[back] == 12 + 4 + 1);  // the whole history again, then one decode
  check_exact_kv(rig);
}

TEST_CASE("a queued turn's cached device chunks count as room for the decode reserve", "[scheduler][tiers]") {
  TierSetup l = tiny_tiers(12, 8, 0);
  l.scheduler.decode_reserve = 0.25;     // 3 of 12 blocks
  l.kv_cache.swap_out_watermark = 0.0;  // idle chunks stay device-only until room is made
  TierRig rig(l);
  const TurnId first = rig.run_turn(1, token_run(18, 100), 2);  // 20 tokens: 5 idle device blocks
  const TurnId decoding = rig.admit(3, token_run(4, 400), 12);
  rig.step();  // decoding: 2 blocks; 5 free
  // Queued together: `fresh` (16 tokens, 4 blocks) first, then conversation
  // 1's next turn, which attaches its 5 device chunks while it waits. Free 5
  // - 4 leaves fewer than the reserve, but those 5 chunks can be made room
  // of, so `fresh` starts now rather than after the decode.
  const TurnId fresh = rig.admit(2, token_run(16, 300), 2);
  const TurnId back = rig.admit(1, rig.next_message(first, 4, 200), 2);
  int fresh_first = -1, decoding_done = -1;
  for (int i = 0; i < 60 && rig.core.has_work(); ++i) {
    if (find(rig.step(), fresh) && fresh_first < 0) fresh_first = i;
    for (const auto& e : rig.events) {
      if (e.turn == decoding && std::holds_alternative<TurnDone>(e.event) && decoding_done < 0)
        decoding_done = i;
    }
  }
  REQUIRE(decoding_done >= 0);
  CHECK(fresh_first == 0);
  CHECK(rig.generated[fresh] == 2);
  CHECK(rig.generated[back] == 2);
  CHECK(rig.core.stats().tiers.recomputed_tokens == 0);
  check_exact_kv(rig);
}
