#include "actors/swap_engine.hpp"

#include "actors/kv_copy_plan.hpp"
#include "runtime/clock.hpp"
#include "runtime/trace_names.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace pensieve::actors {

namespace asio = boost::asio;

namespace {

void check_slot(std::int64_t slots, std::uint32_t slot, const char* what) {
  // A slot outside its pool is the core's bookkeeping gone wrong: a fault.
  if (std::int64_t(slot) >= slots) throw std::out_of_range(what);
}

// The CPU backend's links: the device pool is host memory, copied by CPU
// streams on the worker's stream pool.
backend::KvTierLinks cpu_links(std::shared_ptr<kv::KvPool> device, std::shared_ptr<rt::CpuStreamPool> streams,
                               std::int32_t host_slots) {
  backend::KvTierLinks links;
  links.device = kv::tier_memory(*device);
  links.host = std::make_unique<kv::KvPool>(backend::host_tier_config(device->config(), host_slots));
  // Spans come from the copies themselves (per layer), not per item.
  links.copy_in = std::make_unique<rt::CpuStream>(*streams, rt::trace_names::copy_stream, nullptr);
  links.copy_out = std::make_unique<rt::CpuStream>(*streams, rt::trace_names::copy_stream, nullptr);
  links.owners.push_back(std::move(device));
  links.owners.push_back(std::move(streams));
  return links;
}

}  // namespace

void pack_chunk(const kv::KvPool& pool, std::uint32_t slot, std::span<std::byte> out) {
  const kv::KvTierMemory m = kv::tier_memory(pool);
  check_slot(m.num_blocks, slot, "pack_chunk: bad slot");
  if (out.size() != m.chunk_bytes()) throw std::invalid_argument("pack_chunk: size");
  for (std::int32_t l = 0; l < m.n_layers(); ++l) {
    std::memcpy(out.data() + std::size_t(l) * m.slice_bytes, m.slice(l, slot), m.slice_bytes);
  }
}

void unpack_chunk(kv::KvPool& pool, std::uint32_t slot, std::span<const std::byte> in) {
  const kv::KvTierMemory m = kv::tier_memory(pool);
  check_slot(m.num_blocks, slot, "unpack_chunk: bad slot");
  if (in.size() != m.chunk_bytes()) throw std::invalid_argument("unpack_chunk: size");
  for (std::int32_t l = 0; l < m.n_layers(); ++l) {
    std::memcpy(m.slice(l, slot), in.data() + std::size_t(l) * m.slice_bytes, m.slice_bytes);
  }
}

struct SwapEngine::State {
  enum class Direction { in, out };

  State(backend::KvTierLinks l, rt::TaskGroup& g, asio::any_io_executor ex, SwapEngineConfig c)
      : config(std::move(c)),
        device(std::move(l.device)),
        host(std::move(l.host)),
        host_memory(kv::tier_memory(*host)),
        group(g),
        executor(std::move(ex)),
        owners(std::move(l.owners)),
        gather(std::move(l.gather)),
        thresholds(l.thresholds),
        copy_in(std::move(l.copy_in)),
        copy_out(std::move(l.copy_out)) {
    if (device.slice_bytes != host_memory.slice_bytes || device.n_layers() != host_memory.n_layers()) {
      throw std::invalid_argument("swap engine: the host tier's layout differs from the device tier's");
    }
    stats.host_slots = config.host_slots;
    stats.disk_slots = config.disk ? config.disk->slots() : 0;
  }

  std::vector<rt::Event> enqueue(Direction dir, const std::vector<DeviceHostCopy>& copies, std::uint64_t iteration);
  // Coroutines that hold their state alive (a member coroutine's `this` would not).
  struct DiskBatch {
    TransfersDone done;
    std::size_t remaining = 0;
    std::int64_t started_ns = 0;      // when its I/O was issued
    std::int64_t restores_end_ns = 0;  // when its last restore came back
  };
  static asio::awaitable<void> disk_moves(std::shared_ptr<State> self, rt::Event after,
                                          std::vector<HostDiskCopy> spill, std::vector<HostDiskCopy> restore);
  static asio::awaitable<void> disk_move(std::shared_ptr<State> self, std::shared_ptr<DiskBatch> batch,
                                         HostDiskCopy c, bool spill);
  void report(TransfersDone done) {
    if (config.report) config.report(std::move(done));
  }
  std::size_t chunk_bytes() const { return host_memory.chunk_bytes(); }
  // Chunks one transfer may carry: runs are cut at max_transfer_bytes.
  std::uint32_t max_run_chunks() const {
    const std::size_t cap = config.max_transfer_bytes / std::max<std::size_t>(device.slice_bytes, 1);
    return std::uint32_t(std::clamp<std::size_t>(cap, 1, 1u << 30));
  }

  SwapEngineConfig config;
  kv::KvTierMemory device;
  std::unique_ptr<kv::KvPool> host;
  kv::KvTierMemory host_memory;
  rt::TaskGroup& group;
  asio::any_io_executor executor;
  SwapStats stats;                              // on the handler's executor
  std::atomic<std::int64_t> swap_in_ns{0};      // the copy streams' busy time
  std::atomic<std::int64_t> swap_out_ns{0};
  std::vector<std::shared_ptr<const void>> owners;  // the device memory, the streams' pool: outlive the streams
  std::unique_ptr<backend::TierGather> gather;      // null: DMA copies only
  kernels::SwapCopyThresholds thresholds;
  // One stream per direction, so a swap-out still copying never delays a
  // later swap-in. Declared last: destroyed first, after their work. Their
  // work items point at this state without owning it, so the state never
  // dies on a stream.
  std::unique_ptr<rt::Stream> copy_in;
  std::unique_ptr<rt::Stream> copy_out;
};

std::vector<rt::Event> SwapEngine::State::enqueue(Direction dir, const std::vector<DeviceHostCopy>& copies,
                                                  std::uint64_t iteration) {
  std::vector<rt::Event> events;
  if (copies.empty()) return events;
  std::vector<SlotCopy> slots;
  slots.reserve(copies.size());
  for (const DeviceHostCopy& c : copies) {
    check_slot(device.num_blocks, c.device.value, "swap engine: device block out of range");
    check_slot(host_memory.num_blocks, c.host.value, "swap engine: host slot out of range");
    slots.push_back(dir == Direction::in ? SlotCopy{c.host.value, c.device.value}
                                         : SlotCopy{c.device.value, c.host.value});
  }
  const std::vector<ChunkRun> runs = plan_chunk_runs(slots, config.gather, max_run_chunks());
  const std::int32_t layers = device.n_layers();
  const auto bytes = std::int64_t(device.slice_bytes) * layers * std::int64_t(copies.size());
  if (dir == Direction::in) {
    stats.swap_in_chunks += std::int64_t(copies.size());
    stats.swap_in_bytes += bytes;
  } else {
    stats.swap_out_chunks += std::int64_t(copies.size());
    stats.swap_out_bytes += bytes;
  }
  rt::Stream& stream = dir == Direction::in ? *copy_in : *copy_out;
  // Host slots are the source of a swap_in and the destination of a swap_out.
  const backend::TierDirection tier_dir =
      dir == Direction::in ? backend::TierDirection::to_device : backend::TierDirection::to_host;
  backend::TierGather* const launcher = config.gather_kernel ? gather.get() : nullptr;
  std::vector<backend::TierRun> layer_runs(runs.size());
  const std::string_view name = dir == Direction::in ? "swap_in" : "swap_out";
  std::atomic<std::int64_t>& busy = dir == Direction::in ? swap_in_ns : swap_out_ns;
  const bool traced = config.tracer != nullptr && config.tracer->enabled();
  // The streams' busy time, from the host side of the stream: when it
  // reaches the iteration's first copy and when it is past the last. The
  // work items point at this state without owning it (see copy_in).
  auto started = std::make_shared<std::int64_t>(0);
  stream.enqueue([started] { *started = rt::steady_now_ns(); }, name);
  events.reserve(std::size_t(layers));
  for (std::int32_t l = 0; l < layers; ++l) {
    auto layer_start = std::make_shared<std::int64_t>(0);
    if (config.before_copy_layer || traced) {
      stream.enqueue(
          [this, name, l, layer_start] {
            if (config.before_copy_layer) config.before_copy_layer(name, l);
            *layer_start = rt::steady_now_ns();
          },
          name);
    }
    // On CUDA a cudaMemcpyAsync between pinned host memory and the device
    // per large run (merging adjacent chunks keeps those few and large), one
    // gather launch for many small scattered ones; all before the layer's
    // event, on this direction's stream.
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const ChunkRun& r = runs[i];
      const std::uint32_t device_slot = dir == Direction::in ? r.dst : r.src;
      const std::uint32_t host_slot = dir == Direction::in ? r.src : r.dst;
      layer_runs[i] = {device.slice(l, device_slot), host_memory.slice(l, host_slot),
                       device.slice_bytes * r.count};
    }
    const backend::TierCopyCount count =
        backend::copy_tier_runs(stream, launcher, thresholds, tier_dir, layer_runs, name);
    stats.copy_runs += std::int64_t(count.copies);
    stats.gather_launches += std::int64_t(count.launches);
    stats.gathered_runs += std::int64_t(count.gathered);
    if (traced) {
      stream.enqueue(
          [this, name, l, layer_start, n = runs.size(), iteration] {
            char detail[48];
            std::snprintf(detail, sizeof detail, "layer %d runs %zu it %llu", l, n,
                          static_cast<unsigned long long>(iteration));
            rt::SpanRecord span{rt::SpanKind::stream, rt::trace_names::copy_stream, name, std::uint64_t(l),
                                *layer_start, rt::steady_now_ns()};
            span.detail = detail;
            config.tracer->record(span);
          },
          name);
    }
    events.push_back(stream.record());
  }
  stream.enqueue([started, &busy] { busy.fetch_add(rt::steady_now_ns() - *started, std::memory_order_relaxed); },
                 name);
  return events;
}

asio::awaitable<void> SwapEngine::State::disk_moves(std::shared_ptr<State> self, rt::Event after,
                                                    std::vector<HostDiskCopy> spill,
                                                    std::vector<HostDiskCopy> restore) {
  State& s = *self;
  // The iteration's copies first: a host slot spilled now may have been
  // filled by a swap_out just enqueued.
  co_await after.wait(s.executor, asio::use_awaitable);
  // Every chunk's I/O in flight at once (the store stages each); one report
  // when the last one is back.
  auto batch = std::make_shared<DiskBatch>();
  batch->remaining = spill.size() + restore.size();
  batch->started_ns = rt::steady_now_ns();
  for (HostDiskCopy& c : spill) s.group.spawn(s.executor, disk_move(self, batch, std::move(c), true));
  for (HostDiskCopy& c : restore) s.group.spawn(s.executor, disk_move(self, batch, std::move(c), false));
}

asio::awaitable<void> SwapEngine::State::disk_move(std::shared_ptr<State> self, std::shared_ptr<DiskBatch> batch,
                                                   HostDiskCopy c, bool spill) {
  State& s = *self;
  const std::int64_t start = rt::steady_now_ns();
  const auto bytes = std::int64_t(s.chunk_bytes());
  if (spill) {
    auto written = co_await s.config.disk->write(c.disk, *s.host, c.host, c.tokens, c.label);
    s.stats.spill_ns += rt::steady_now_ns() - start;
    if (written) {
      ++s.stats.spill_chunks;
      s.stats.spill_bytes += bytes;
      batch->done.spill.push_back(std::move(c));
    } else {
      ++s.stats.spill_failed;
      batch->done.spill_failed.push_back(std::move(c));
    }
  } else {
    auto read = co_await s.config.disk->read(c.disk, *s.host, c.host, c.tokens);
    s.stats.restore_ns += rt::steady_now_ns() - start;
    if (read && *read == ChunkReadStatus::ok) {
      ++s.stats.restore_chunks;
      s.stats.restore_bytes += bytes;
      batch->done.restored.push_back(std::move(c));
    } else {
      // An I/O error and a bad chunk end the same way: the chunk is
      // recomputed from the conversation's tokens.
      ++s.stats.restore_corrupt;
      batch->done.corrupt.push_back(std::move(c));
    }
    batch->restores_end_ns = rt::steady_now_ns();
  }
  if (s.config.tracer != nullptr) {
    s.config.tracer->record({rt::SpanKind::file_io, rt::trace_names::swap_engine, spill ? "spill" : "restore",
                             c.disk.value, start, rt::steady_now_ns()});
  }
  if (--batch->remaining == 0) {
    if (batch->restores_end_ns > 0) batch->done.restore_wall_ns = batch->restores_end_ns - batch->started_ns;
    s.report(std::move(batch->done));
  }
}

SwapEngine::SwapEngine(std::shared_ptr<kv::KvPool> device, std::shared_ptr<rt::CpuStreamPool> streams,
                       rt::TaskGroup& group, asio::any_io_executor executor, SwapEngineConfig config)
    : SwapEngine(cpu_links(std::move(device), std::move(streams), config.host_slots), group, std::move(executor),
                 std::move(config)) {}

SwapEngine::SwapEngine(backend::KvTierLinks links, rt::TaskGroup& group, asio::any_io_executor executor,
                       SwapEngineConfig config)
    : state_(std::make_shared<State>(std::move(links), group, std::move(executor), std::move(config))) {}

kv::KvPool& SwapEngine::host_pool() { return *state_->host; }
std::size_t SwapEngine::chunk_bytes() const { return state_->chunk_bytes(); }

void SwapEngine::operator()(SwapIteration m) {
  State& s = *state_;
  KvTransfers& t = m.transfers;
  SwapTicket ticket;
  ticket.layer_ready = s.enqueue(State::Direction::in, t.swap_in, m.iteration);
  // Within an iteration host -> device copies land before device -> host
  // ones start (a block filled and copied out sends what arrived); a later
  // iteration's swap-in never waits for this swap-out.
  if (!t.swap_out.empty() && !ticket.layer_ready.empty()) s.copy_out->wait(ticket.layer_ready.back());
  m.reply.send(std::move(ticket));
  if (!t.swap_out.empty()) {
    s.enqueue(State::Direction::out, t.swap_out, m.iteration);
    // Reported once the copies have run: until then the core keeps both the
    // device block and the host slot out of reach.
    // Holds the state weakly: this callback must not be what destroys it.
    s.copy_out->record().wait(s.executor, [weak = std::weak_ptr<State>(state_), done = std::move(t.swap_out)]() mutable {
      auto state = weak.lock();
      if (!state) return;  // shutting down: nobody is left to tell
      TransfersDone d;
      d.swap_out = std::move(done);
      state->report(std::move(d));
    });
  }
  if (t.spill.empty() && t.restore.empty()) return;
  if (!s.config.disk) {
    // No disk tier: the core should not have asked. Fail the spills, and
    // report the restores corrupt so their chunks are recomputed.
    TransfersDone d;
    d.spill_failed = std::move(t.spill);
    d.corrupt = std::move(t.restore);
    s.report(std::move(d));
    return;
  }
  // After this iteration's swap-out (a spill reads host slots it may fill).
  s.group.spawn(s.executor, State::disk_moves(state_, s.copy_out->record(), std::move(t.spill), std::move(t.restore)));
}

void SwapEngine::operator()(GetSwapStats m) {
  SwapStats out = state_->stats;
  out.swap_in_ns = state_->swap_in_ns.load(std::memory_order_relaxed);
  out.swap_out_ns = state_->swap_out_ns.load(std::memory_order_relaxed);
  m.reply.send(out);
}

}  // namespace pensieve::actors
