// A tiered soak: concurrent sessions open conversations, play a few turns
// each (some cancelled mid-reply), and drop conversations (some while a
// turn still runs), for PENSIEVE_TIERS_SOAK_S seconds per run (default 2;
// three runs: each eviction policy, then cost-aware again with a scheduler
// inbox of 2 messages), through the real Engine on a generated model whose
// device, host and disk budgets are so small that every tier and every
// eviction path runs. Then:
//  - no hang: a watchdog fails the test when no turn ends for
//    PENSIEVE_TIERS_STALL_S seconds (default 60), with the engine's state;
//  - every turn that finished gave the tokens the same conversation gives
//    when replayed on a --no-state engine (cancelled ones: as many tokens
//    as they got);
//  - once every conversation is deleted, no device block, host slot or
//    disk chunk is still taken, and no chunk read back was corrupt.
#include "actors/engine.hpp"
#include "tests/actors/engine_calls.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_model.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace pensieve;
using pensieve::testing::send_turn;
namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// A coroutine's exception (a failed REQUIRE) ends io.run() with it.
void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

constexpr std::int32_t kMaxTokens = 12;
constexpr int kSessions = 6;

double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v ? std::atof(v) : fallback;
}

model::ModelWeights soak_model() {
  model::TestModelOptions o = testing::tiny_model_options();
  o.max_context = 512;
  o.seed = 5;
  return testing::tiny_model(o);
}

struct TurnOutcome {
  std::string text;            // the user message
  bool ok = false;
  bool cancelled = false;
  bool dropped = false;  // its conversation was deleted while it ran
  int cancel_after = 0;  // the sink stopped listening after this many tokens; 0: never
  std::int32_t completion_tokens = 0;  // what the history grew by (a cancelled turn: what it got)
  std::vector<std::int32_t> seen;      // what the sink saw
  std::string error;
};

struct SessionRecord {
  std::string id;
  std::vector<TurnOutcome> turns;
};

struct SoakState {
  std::vector<SessionRecord> sessions;
  std::vector<std::string> live;  // conversations left to delete at the end
  std::uint64_t turns_ended = 0;
  int active = 0;
  std::uint64_t failed_turns = 0;
  std::string first_error;
};

model::SamplingParams greedy(std::int32_t max_tokens) {
  model::SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;  // every reply is max_tokens long unless cancelled
  p.logprobs = true;    // deltas carry their token ids
  return p;
}

std::string random_text(std::mt19937& rng) {
  static const char* const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "then", "we", "went",
                                      "home", "to", "eat", "soup", "with", "bread", "why", "not", "tell", "me"};
  std::uniform_int_distribution<int> count(2, 9), word(0, 19);
  std::string out;
  for (int i = count(rng); i > 0; --i) out += std::string(out.empty() ? "" : " ") + words[word(rng)];
  return out;
}

// One turn of `rec`'s conversation; `last`: its final turn (maybe deleted while it runs).
asio::awaitable<bool> play_turn(actors::Engine& engine, SessionRecord& rec, bool last, std::mt19937& rng,
                                SoakState& st, bool& deleted) {
  TurnOutcome out;
  out.text = random_text(rng);
  out.cancel_after = rng() % 4 == 0 ? std::uniform_int_distribution<int>(1, kMaxTokens - 1)(rng) : 0;
  const bool drop_in_flight = last && rng() % 4 == 0;
  actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    for (const auto& tok : d.tokens) out.seen.push_back(tok.token);
    if (drop_in_flight && !deleted) out.dropped = deleted = engine.delete_conversation("t", rec.id);
    co_return out.cancel_after == 0 || std::int32_t(out.seen.size()) < out.cancel_after;
  };
  std::vector<model::ChatMessage> messages{{"user", out.text}};
  auto result =
      co_await send_turn(engine, "t", rec.id, std::move(messages), greedy(kMaxTokens), sink);
  ++st.turns_ended;
  if (result.has_value()) {
    out.ok = true;
    out.cancelled = result->cancelled;
    out.completion_tokens = result->completion_tokens;
  } else {
    out.error = result.error().message;
    ++st.failed_turns;
    if (st.first_error.empty()) st.first_error = rec.id + ": " + out.error;
  }
  rec.turns.push_back(std::move(out));
  co_return rec.turns.back().ok;
}

// One client until the deadline: two conversations of 1-5 turns open at a
// time, a turn of either in random order (so each idles while the other
// runs and its KV drifts down the tiers); an ended one is deleted or left.
asio::awaitable<void> session(actors::Engine& engine, int index, Clock::time_point deadline, SoakState& st) {
  std::mt19937 rng(std::uint32_t(1000 + index));
  struct Open {
    SessionRecord rec;
    int turns = 0;
    bool deleted = false;
  };
  std::vector<Open> open;
  int created = 0;
  while (Clock::now() < deadline) {
    while (open.size() < 2) {
      Open o;
      o.rec.id = "s" + std::to_string(index) + "-" + std::to_string(created++);
      o.turns = std::uniform_int_distribution<int>(1, 5)(rng);
      auto made = engine.create_conversation("t", o.rec.id);
      REQUIRE(made.has_value());
      open.push_back(std::move(o));
    }
    const std::size_t pick = rng() % open.size();
    Open& o = open[pick];
    const bool last = int(o.rec.turns.size()) + 1 == o.turns;
    const bool ok = co_await play_turn(engine, o.rec, last, rng, st, o.deleted);
    if (!ok || int(o.rec.turns.size()) == o.turns) {
      if (!o.deleted) {
        if (rng() % 2 == 0) o.deleted = engine.delete_conversation("t", o.rec.id);
        else st.live.push_back(o.rec.id);
      }
      st.sessions.push_back(std::move(o.rec));
      open.erase(open.begin() + std::ptrdiff_t(pick));
    }
  }
  for (Open& o : open) {
    st.live.push_back(o.rec.id);
    st.sessions.push_back(std::move(o.rec));
  }
  --st.active;
}

std::string describe(const actors::SchedulerStats& s, const actors::SwapStats& w) {
  const actors::TierStats& t = s.tiers;
  std::ostringstream o;
  o << "waiting " << s.waiting << " running " << s.running << " cached " << s.cached_conversations << " free blocks "
    << s.free_blocks << "/" << s.num_blocks << " host " << t.free_host_slots << "/" << t.host_slots << " disk "
    << t.free_disk_slots << "/" << t.disk_slots << " | iterations " << s.iterations << " preemptions "
    << s.preemptions << " | swap in/out " << w.swap_in_chunks << "/" << w.swap_out_chunks << " spill "
    << w.spill_chunks << " restore " << w.restore_chunks << " corrupt " << w.restore_corrupt << " | hits d/h/disk "
    << t.hit_tokens_device << "/" << t.hit_tokens_host << "/" << t.hit_tokens_disk << " recomputed "
    << t.recomputed_tokens << " evicted conversations " << t.evicted_conversations << " dropped d/h/disk "
    << t.device_dropped << "/" << t.host_dropped << "/" << t.disk_dropped;
  return o.str();
}

struct Snapshot {
  actors::SchedulerStats scheduler;
  actors::SwapStats swap;
};

asio::awaitable<Snapshot> snapshot(actors::Engine& engine) {
  Snapshot s;
  s.scheduler = co_await engine.stats();
  s.swap = co_await engine.swap_stats();
  co_return s;
}

bool drained(const actors::SchedulerStats& s) {
  return s.waiting == 0 && s.running == 0 && s.cached_conversations == 0 && s.free_blocks == s.num_blocks &&
         s.tiers.free_host_slots == s.tiers.host_slots && s.tiers.free_disk_slots == s.tiers.disk_slots;
}

struct SoakResult {
  SoakState state;
  Snapshot end;        // after every conversation was deleted and the moves settled
  bool hung = false;
  std::string hang_state;
};

// The watchdog: fails the run when no turn ends for `stall` while sessions are active.
asio::awaitable<void> watchdog(actors::Engine& engine, SoakResult& r, std::chrono::duration<double> stall,
                               asio::io_context& io) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::uint64_t last = r.state.turns_ended;
  auto since = Clock::now();
  while (r.state.active > 0) {
    timer.expires_after(std::chrono::milliseconds(200));
    co_await timer.async_wait(asio::use_awaitable);
    if (r.state.turns_ended != last) {
      last = r.state.turns_ended;
      since = Clock::now();
    } else if (Clock::now() - since > stall) {
      const Snapshot s = co_await snapshot(engine);
      r.hung = true;
      r.hang_state = describe(s.scheduler, s.swap);
      io.stop();
      co_return;
    }
  }
}

asio::awaitable<void> settle(actors::Engine& engine, SoakResult& r) {
  for (const std::string& id : r.state.live) engine.delete_conversation("t", id);
  // Deletes and the last reports of moves in flight reach the scheduler
  // in their own time: wait (bounded) until nothing is held.
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto until = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    r.end = co_await snapshot(engine);
    if (drained(r.end.scheduler) || Clock::now() > until) co_return;
    timer.expires_after(std::chrono::milliseconds(5));
    co_await timer.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<void> run_soak(actors::Engine& engine, SoakResult& r, double seconds, asio::io_context& io) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto ex = co_await asio::this_coro::executor;
  r.state.active = kSessions;
  for (int i = 0; i < kSessions; ++i) asio::co_spawn(ex, session(engine, i, deadline, r.state), rethrow);
  co_await watchdog(engine, r, std::chrono::duration<double>(env_seconds("PENSIEVE_TIERS_STALL_S", 60)), io);
  if (r.hung) co_return;
  co_await settle(engine, r);
}

actors::EngineOptions tiny_tiers(const testing::TempDir& disk, actors::EvictionPolicyKind policy,
                                 std::int32_t scheduler_mailbox_messages) {
  actors::EngineOptions o;
  o.scheduler_mailbox_messages = scheduler_mailbox_messages;
  o.n_threads = 1;
  o.kv_block_tokens = 16;
  o.kv_device_blocks = 32;  // one long conversation (512 tokens) fits; a few at once do not
  o.kv_host_blocks = 8;
  o.kv_disk_dir = (disk / "kv").string();
  o.kv_disk_bytes = 16 * (8192 + 4096);  // about 16 chunks (8 KiB of KV and a 4 KiB header each)
  o.kv_cache.eviction_policy = policy;
  o.kv_cache.swap_out_watermark = 0.5;  // idle chunks go out to the host (and on to disk) early
  return o;
}

// Replays every session's turns on a --no-state engine, a few sessions at
// a time; a cancelled turn asks for exactly the tokens it got.
asio::awaitable<void> replay_session(actors::Engine& engine, const SessionRecord& rec,
                                     std::vector<std::vector<std::int32_t>>& out) {
  auto created = engine.create_conversation("t", rec.id);
  REQUIRE(created.has_value());
  for (const TurnOutcome& t : rec.turns) {
    if (!t.ok) break;
    std::vector<std::int32_t> tokens;
    actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
      for (const auto& tok : d.tokens) tokens.push_back(tok.token);
      co_return true;
    };
    std::vector<model::ChatMessage> messages{{"user", t.text}};
    auto result = co_await send_turn(engine, "t", rec.id, std::move(messages),
                                     greedy(t.completion_tokens), sink);
    REQUIRE(result.has_value());
    out.push_back(std::move(tokens));
  }
}

std::vector<std::vector<std::vector<std::int32_t>>> replay_no_state(const std::vector<SessionRecord>& sessions) {
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_block_tokens = 16;
  o.scheduler.keep_kv = false;
  o.kv_cache_mb = 64;
  std::vector<std::vector<std::vector<std::int32_t>>> out(sessions.size());
  asio::io_context io;
  auto engine = actors::Engine::create(soak_model(), o);
  REQUIRE(engine.has_value());
  constexpr std::size_t group = 16;
  for (std::size_t begin = 0; begin < sessions.size(); begin += group) {
    for (std::size_t i = begin; i < std::min(sessions.size(), begin + group); ++i) {
      asio::co_spawn(io, replay_session(**engine, sessions[i], out[i]), rethrow);
    }
    io.restart();
    io.run();
  }
  return out;
}

}  // namespace

TEST_CASE("a tiered soak with cancels and drops never hangs, matches --no-state and leaks nothing",
          "[engine][tiers][soak]") {
  // The last run's scheduler inbox holds 2 messages: turns, deletes and the
  // swap engine's reports keep meeting it full (and must wait, never vanish).
  using Policy = actors::EvictionPolicyKind;
  const auto [policy, mailbox_messages] =
      GENERATE(table<Policy, std::int32_t>({{Policy::cost_aware, 1024}, {Policy::lru, 1024}, {Policy::cost_aware, 2}}));
  INFO("policy " << (policy == Policy::lru ? "lru" : "cost-aware") << ", scheduler inbox " << mailbox_messages);
  const double seconds = env_seconds("PENSIEVE_TIERS_SOAK_S", 2);
  testing::TempDir disk("tiers-soak");
  SoakResult r;
  {
    asio::io_context io;  // outlives the engine, which completes operations on it
    auto engine = actors::Engine::create(soak_model(), tiny_tiers(disk, policy, mailbox_messages));
    REQUIRE(engine.has_value());
    asio::co_spawn(io, run_soak(**engine, r, seconds, io), rethrow);
    io.run();
    INFO("engine state when it stopped making progress: " << r.hang_state);
    REQUIRE_FALSE(r.hung);
  }
  const actors::SchedulerStats& s = r.end.scheduler;
  const actors::SwapStats& w = r.end.swap;
  std::size_t turns = 0, cancelled = 0;
  for (const auto& rec : r.state.sessions) {
    for (const auto& t : rec.turns) {
      turns += 1;
      cancelled += t.cancelled ? 1 : 0;
    }
  }
  std::printf("tiers soak (%s, inbox %d, %.0f s): %zu conversations, %zu turns (%zu cancelled); %s\n",
              policy == Policy::lru ? "lru" : "cost-aware", int(mailbox_messages), seconds, r.state.sessions.size(),
              turns, cancelled, describe(s, w).c_str());
  INFO(describe(s, w));
  // Nothing failed; nothing is held once every conversation is gone.
  INFO("first failure: " << r.state.first_error);
  CHECK(r.state.failed_turns == 0);
  CHECK(s.waiting == 0);
  CHECK(s.running == 0);
  CHECK(s.cached_conversations == 0);
  CHECK(s.free_blocks == s.num_blocks);
  CHECK(s.tiers.free_host_slots == s.tiers.host_slots);
  CHECK(s.tiers.free_disk_slots == s.tiers.disk_slots);
  CHECK(s.tiers.disk_slots > 0);
  CHECK(w.restore_corrupt == 0);
  CHECK(s.tiers.corrupt_chunks == 0);
  CHECK(w.spill_failed == 0);
  // The budgets pushed KV through every tier.
  CHECK(w.swap_out_chunks > 0);
  CHECK(w.swap_in_chunks > 0);
  CHECK(w.spill_chunks > 0);
  CHECK(w.restore_chunks > 0);
  CHECK(s.tiers.recomputed_tokens > 0);
  // Every finished turn gave the --no-state engine's tokens.
  const auto want = replay_no_state(r.state.sessions);
  for (std::size_t i = 0; i < r.state.sessions.size(); ++i) {
    const SessionRecord& rec = r.state.sessions[i];
    for (std::size_t t = 0; t < rec.turns.size() && t < want[i].size(); ++t) {
      const TurnOutcome& got = rec.turns[t];
      INFO("conversation " << rec.id << " turn " << t << (got.cancelled ? " (cancelled)" : "")
                           << " cancel after " << got.cancel_after
                           << (got.dropped ? " (deleted while it ran)" : ""));
      REQUIRE(want[i][t].size() == std::size_t(got.completion_tokens));
      REQUIRE(got.seen.size() <= want[i][t].size());
      CHECK(std::equal(got.seen.begin(), got.seen.end(), want[i][t].begin()));
      // A sink that stopped listening saw a prefix (the turn may still have
      // ended on its own before the cancel arrived); any other saw it all.
      if (got.cancel_after == 0) CHECK(got.seen == want[i][t]);
      else CHECK(got.seen.size() >= std::min(std::size_t(got.cancel_after), want[i][t].size()));
    }
  }
}
