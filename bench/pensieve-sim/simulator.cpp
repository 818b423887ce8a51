#include "bench/pensieve-sim/simulator.hpp"

#include "bench/pensieve-sim/iteration_cost.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <random>
#include <variant>

namespace pensieve::sim {

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::pensieve:
      return "pensieve";
    case Policy::stateless:
      return "stateless";
    case Policy::prefix_lru:
      return "prefix-lru";
    case Policy::offload_lru:
      return "offload-lru";
  }
  return "?";
}

Result<std::vector<Policy>> parse_policies(const std::string& text) {
  const std::vector<Policy> all = {Policy::pensieve, Policy::stateless, Policy::prefix_lru, Policy::offload_lru};
  if (text == "all") return all;
  for (Policy p : all) {
    if (text == policy_name(p)) return std::vector<Policy>{p};
  }
  return fail("--policy: '" + text + "' is not pensieve, stateless, prefix-lru, offload-lru or all");
}

namespace {

bool uses_host_tier(Policy p) { return p == Policy::pensieve || p == Policy::offload_lru; }

// One chunk (KV block) of every rank: what a tier move carries.
double chunk_bytes(const ModelShape& m, const SimOptions& o) { return double(o.block_tokens) * m.kv_bytes_per_token(); }

std::int64_t ns(double s) { return std::int64_t(std::llround(s * 1e9)); }

// A synthetic token id, distinct per conversation and position, so that no
// two conversations share a prefix by accident.
std::int32_t token_at(std::size_t conversation, std::size_t position) {
  return std::int32_t(10 + (conversation * 7919 + position * 104729) % 30000);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = std::size_t(std::clamp(std::ceil(p * double(v.size())) - 1.0, 0.0, double(v.size() - 1)));
  return v[i];
}

struct Arrival {
  double time;
  std::size_t conversation;
  bool operator>(const Arrival& o) const { return time != o.time ? time > o.time : conversation > o.conversation; }
};

struct Completion {
  double time;
  std::uint64_t order;  // ties in issue order: deterministic
  actors::TransfersDone done;
  bool operator>(const Completion& o) const { return time != o.time ? time > o.time : order > o.order; }
};

// A queue a direction's copies (or a disk's I/O) go through one at a time.
struct Channel {
  double free_at = 0;
  double finish(double now, double bytes, double gbps) {
    free_at = std::max(free_at, now) + bytes / (gbps * 1e9);
    return free_at;
  }
};

struct LiveTurn {
  std::size_t conversation = 0;
  std::size_t index = 0;  // the turn's place in its conversation
  double arrival = 0;
  double first_token = -1;
  std::int32_t output = 0;
  std::int32_t generated = 0;
  std::int32_t prompt = 0;
};

}  // namespace

Result<SimCapacity> capacity(const DeviceModel& d, const ModelShape& m, const SimOptions& o) {
  const double tp = std::max(1, o.tp);
  double kv_bytes = d.kv_budget_gb > 0 ? d.kv_budget_gb * 1e9 * tp
                                       : (d.memory_gb * d.memory_utilization - d.activation_reserve_gb) * 1e9 * tp -
                                             m.weight_bytes();
  if (kv_bytes <= 0) {
    return fail(m.name + " does not fit " + std::to_string(o.tp) + " x " + d.name + " (weights " +
                std::to_string(m.weight_bytes() / 1e9) + " GB)");
  }
  SimCapacity c;
  const double chunk = chunk_bytes(m, o);
  c.device_blocks = std::int32_t(std::min(kv_bytes / chunk, 1e9));
  if (uses_host_tier(o.policy)) c.host_slots = std::int32_t(std::min(o.host_gb * 1e9 / chunk, 1e9));
  if (o.policy == Policy::pensieve && c.host_slots > 0) c.disk_slots = std::int32_t(std::min(o.disk_gb * 1e9 / chunk, 1e9));
  if (c.device_blocks < 1) return fail("no KV block fits the device");
  return c;
}

Result<SimResult> simulate(const Workload& w, const DeviceModel& d, const ModelShape& m, const SimOptions& o) {
  auto cap = capacity(d, m, o);
  if (!cap) return cap.error();
  actors::SchedulerOptions so;
  so.max_batch_tokens = o.max_batch_tokens;
  so.max_running = o.max_running;
  so.max_admitted = 1 << 30;  // an open system: every arrival waits its turn
  so.keep_kv = o.policy != Policy::stateless;
  actors::KvCacheSizes sizes;
  sizes.num_blocks = cap->device_blocks;
  sizes.block_tokens = o.block_tokens;
  sizes.host_slots = cap->host_slots;
  sizes.disk_slots = cap->disk_slots;
  actors::KvCacheOptions ko;
  ko.eviction_policy = o.policy == Policy::pensieve ? actors::EvictionPolicyKind::cost_aware : actors::EvictionPolicyKind::lru;
  // The recompute cost's two terms in this device's proportion: a token's
  // linear layers against one (query, key) pair of attention.
  ko.cost_model.per_token = 2.0 * m.matrix_params();
  ko.cost_model.per_token_pair = 4.0 * double(m.n_heads) * m.head_dim * m.n_layers;
  actors::SchedulerCore core(so, sizes, ko);

  SimResult r;
  r.policy = o.policy;
  r.rate = o.rate;
  r.host_gb = uses_host_tier(o.policy) ? o.host_gb : 0.0;
  r.device_blocks = cap->device_blocks;
  r.host_slots = cap->host_slots;
  r.disk_slots = cap->disk_slots;

  const std::size_t total_turns = w.turns();
  const double mean_turns = double(total_turns) / double(w.conversations.size());
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(std::max(o.rate, 1e-9) / mean_turns);
  std::exponential_distribution<double> think(1.0 / std::max(o.think_s, 1e-9));
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals;
  double t = 0;
  for (std::size_t c = 0; c < w.conversations.size(); ++c) {
    const double start = w.conversations[c].start_s;
    if (start < 0) t += gap(rng);
    arrivals.push({start < 0 ? t : start, c});
  }
  std::vector<std::vector<std::int32_t>> history(w.conversations.size());
  std::vector<std::size_t> next_turn(w.conversations.size(), 0);
  std::map<std::uint64_t, LiveTurn> live;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> inflight;
  Channel d2h, disk_write, disk_read;
  std::uint64_t next_turn_id = 1, order = 0;
  std::vector<double> ttft, normalized;
  std::int64_t output_tokens = 0;
  double now = 0;
  std::vector<actors::TurnUpdate> events;

  // A conversation whose last turn has ended keeps its KV, as the server
  // keeps a stored conversation's. Once every chunk of it is dropped, its
  // entry only lengthens the cache manager's scans (they visit every
  // conversation's chunks, dropped ones too: at 10^3 conversations most of
  // the simulation's time), so it is forgotten then; no decision changes,
  // since nothing of it is cached.
  std::vector<std::size_t> finished;
  auto forget_emptied = [&]() {
    for (std::size_t i = 0; i < finished.size();) {
      const actors::ConversationId id{finished[i] + 1};
      const auto chunks = core.cached_chunks(id);
      const bool empty = std::all_of(chunks.begin(), chunks.end(), [](const actors::ChunkView& v) {
        return v.tier == actors::ChunkTier::dropped && !v.moving;
      });
      if (!empty) {
        ++i;
        continue;
      }
      core.drop_conversation(id);
      finished[i] = finished.back();
      finished.pop_back();
    }
  };
  auto end_turn = [&](const LiveTurn& lt, bool ok) {
    if (!ok) {
      ++r.failed_turns;
      finished.push_back(lt.conversation);
      return;  // the conversation goes no further
    }
    ++r.turns;
    output_tokens += lt.generated;
    ttft.push_back(lt.first_token - lt.arrival);
    if (o.record_turns) r.turn_timings.push_back({lt.conversation, lt.index, lt.arrival, ttft.back(), now - lt.arrival});
    normalized.push_back((now - lt.arrival) / std::max(1, lt.generated));
    const SimConversation& conv = w.conversations[lt.conversation];
    if (next_turn[lt.conversation] < conv.turns.size()) {
      const double given = conv.turns[next_turn[lt.conversation]].think_before_s;
      arrivals.push({now + (given < 0 ? think(rng) : given), lt.conversation});
    } else {
      finished.push_back(lt.conversation);
    }
  };
  auto handle = [&](std::vector<actors::TurnUpdate>& evs) {
    for (actors::TurnUpdate& u : evs) {
      auto it = live.find(u.turn.value);
      if (it == live.end()) continue;
      LiveTurn& lt = it->second;
      if (auto* s = std::get_if<actors::TurnStarted>(&u.event)) {
        r.prompt_tokens += s->prompt_tokens;
        r.reused_tokens += s->cached_tokens;
      } else if (auto* delta = std::get_if<actors::TurnDelta>(&u.event)) {
        if (lt.first_token < 0) lt.first_token = now;
        for (const auto& tok : delta->tokens) history[lt.conversation].push_back(tok.token);
      } else if (std::holds_alternative<actors::TurnDone>(u.event)) {
        end_turn(lt, true);
        live.erase(it);
      } else if (std::holds_alternative<actors::TurnFailed>(u.event)) {
        end_turn(lt, false);
        live.erase(it);
      }
    }
    evs.clear();
  };
  auto start_turn = [&](std::size_t c, double arrival) {
    const SimTurn& turn = w.conversations[c].turns[next_turn[c]];
    std::vector<std::int32_t>& h = history[c];
    for (std::int32_t i = 0; i < turn.user_tokens; ++i) h.push_back(token_at(c, h.size()));
    actors::TurnSpec spec;
    spec.turn = actors::TurnId{next_turn_id++};
    spec.conversation = actors::ConversationId{c + 1};
    spec.tokens = h;
    spec.sampling.temperature = 0.0f;
    spec.sampling.max_tokens = turn.output_tokens;
    spec.sampling.ignore_eos = true;
    spec.keep_kv = o.policy != Policy::stateless;
    LiveTurn lt{c, next_turn[c], arrival, -1, turn.output_tokens, 0, std::int32_t(h.size())};
    ++next_turn[c];
    const actors::AdmitStatus status = core.admit(std::move(spec), ns(now));
    if (status != actors::AdmitStatus::admitted) {
      end_turn(lt, false);  // too large for the device: the conversation stops here
      return;
    }
    live.emplace(next_turn_id - 1, lt);
  };
  auto finish_moves = [&]() {
    while (!inflight.empty() && inflight.top().time <= now) {
      core.transfers_done(inflight.top().done);
      inflight.pop();
    }
  };
  const double chunk = chunk_bytes(m, o), ranks = std::max(1, o.tp);
  const double turn_start_s = d.turn_start_us * 1e-6;

  std::uint64_t guard = 0;
  while (r.turns + r.failed_turns < total_turns) {
    if (++guard > 200'000'000) return fail("pensieve-sim: no progress (a scheduler that never finishes its turns)");
    // A turn reaches the scheduler its front half after it arrived (the
    // same delay for every turn, so the queue's order is the arrivals').
    while (!arrivals.empty() && arrivals.top().time + turn_start_s <= now) {
      const Arrival a = arrivals.top();
      arrivals.pop();
      start_turn(a.conversation, a.time);
    }
    finish_moves();
    const actors::IterationPlan plan = core.plan(ns(now), events);
    handle(events);
    const actors::KvTransfers& tr = plan.transfers;
    const double in_bytes = double(tr.swap_in.size()) * chunk;
    r.h2d_bytes += in_bytes;
    // Background moves: reported to the core when their modelled copy ends.
    auto in_background = [&](std::size_t chunks, double& moved, Channel& channel, double per_channel, double gbps,
                             actors::TransfersDone done) {
      const double bytes = double(chunks) * chunk;
      moved += bytes;
      inflight.push({channel.finish(now, bytes / per_channel, gbps), order++, std::move(done)});
    };
    if (!tr.swap_out.empty()) {
      const double gbps = d.pcie_d2h_gbps * (tr.swap_in.empty() ? 1.0 : 1.0 - d.pcie_duplex_loss);
      in_background(tr.swap_out.size(), r.d2h_bytes, d2h, ranks, gbps, {.swap_out = tr.swap_out});
    }
    if (!tr.spill.empty()) in_background(tr.spill.size(), r.disk_bytes, disk_write, 1.0, d.disk_write_gbps, {.spill = tr.spill});
    if (!tr.restore.empty())
      in_background(tr.restore.size(), r.disk_bytes, disk_read, 1.0, d.disk_read_gbps, {.restored = tr.restore});
    if (plan.empty()) {
      if (in_bytes > 0) {
        now += in_bytes / ranks / (d.pcie_h2d_gbps * 1e9);
        continue;
      }
      double next = INFINITY;
      if (!arrivals.empty()) next = arrivals.top().time + turn_start_s;
      if (!inflight.empty()) next = std::min(next, inflight.top().time);
      if (!std::isfinite(next)) {
        if (core.has_work()) return fail("pensieve-sim: turns are waiting but nothing can run and nothing is in flight");
        break;
      }
      now = std::max(now, next);
      continue;
    }
    std::vector<BatchRow> rows;
    rows.reserve(plan.sequences.size());
    for (const actors::PlannedSequence& p : plan.sequences) rows.push_back({p.start_pos, std::int64_t(p.tokens.size()), p.sample});
    const IterationCost cost = iteration_cost(d, m, o.tp, rows, in_bytes / ranks);
    now += cost.total_s;
    ++r.iterations;
    std::vector<actors::SampleResult> samples;
    for (const actors::PlannedSequence& p : plan.sequences) {
      if (!p.sample) continue;
      auto it = live.find(p.turn.value);
      if (it == live.end()) continue;
      LiveTurn& lt = it->second;
      ++lt.generated;
      actors::SampleResult s;
      s.turn = p.turn;
      s.token.token = token_at(lt.conversation, std::size_t(p.start_pos) + p.tokens.size());
      s.finish = lt.generated >= lt.output ? model::FinishReason::length : model::FinishReason::none;
      samples.push_back(std::move(s));
    }
    core.complete(plan, samples, ns(now), events);
    handle(events);
    if (r.iterations % 64 == 0) forget_emptied();
  }
  r.makespan_s = now;
  const actors::SchedulerStats st = core.stats();
  r.scheduler_iterations = st.iterations;
  r.prefill_tokens = st.prefill_tokens;
  r.hit_device = st.tiers.hit_tokens_device;
  r.hit_host = st.tiers.hit_tokens_host;
  r.hit_disk = st.tiers.hit_tokens_disk;
  r.recomputed = st.tiers.recomputed_tokens;
  if (now > 0) {
    r.throughput_turns_s = double(r.turns) / now;
    r.output_tokens_s = double(output_tokens) / now;
  }
  double sum = 0;
  for (double v : normalized) sum += v;
  r.mean_normalized_latency_s = normalized.empty() ? 0 : sum / double(normalized.size());
  double ttft_sum = 0;
  for (double v : ttft) ttft_sum += v;
  r.ttft_mean_s = ttft.empty() ? 0 : ttft_sum / double(ttft.size());
  r.ttft_p50_s = percentile(ttft, 0.5);
  r.ttft_p99_s = percentile(ttft, 0.99);
  return r;
}

}  // namespace pensieve::sim
