#include "actors/swap_engine.hpp"

#include "actors/kv_copy_plan.hpp"
#include "runtime/clock.hpp"
#include "runtime/trace_names.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace pensieve::actors {

namespace asio = boost::asio;

namespace {

kv::KvPoolConfig host_config(const kv::KvPoolConfig& device, std::int32_t slots) {
  kv::KvPoolConfig c = device;
  c.num_blocks = slots;
  c.tier = kv::Tier::host;
  c.poison_freed = false;  // the host tier never runs kernels over its slots
  return c;
}

std::size_t slice_bytes(const kv::KvPool& pool) {
  return pool.layer(0).block_bytes();
}

std::byte* slice(const kv::KvPool& pool, std::int32_t layer, std::uint32_t slot) {
  return static_cast<std::byte*>(pool.layer(layer).data) + std::size_t(slot) * slice_bytes(pool);
}

void check_slot(const kv::KvPool& pool, std::uint32_t slot, const char* what) {
  // A slot outside its pool is the core's bookkeeping gone wrong: a fault.
  if (std::int64_t(slot) >= pool.config().num_blocks) throw std::out_of_range(what);
}

}  // namespace

void pack_chunk(const kv::KvPool& pool, std::uint32_t slot, std::span<std::byte> out) {
  const std::size_t bytes = slice_bytes(pool);
  check_slot(pool, slot, "pack_chunk: bad slot");
  if (out.size() != bytes * std::size_t(pool.config().n_layers)) throw std::invalid_argument("pack_chunk: size");
  for (std::int32_t l = 0; l < pool.config().n_layers; ++l) {
    std::memcpy(out.data() + std::size_t(l) * bytes, slice(pool, l, slot), bytes);
  }
}

void unpack_chunk(kv::KvPool& pool, std::uint32_t slot, std::span<const std::byte> in) {
  const std::size_t bytes = slice_bytes(pool);
  check_slot(pool, slot, "unpack_chunk: bad slot");
  if (in.size() != bytes * std::size_t(pool.config().n_layers)) throw std::invalid_argument("unpack_chunk: size");
  for (std::int32_t l = 0; l < pool.config().n_layers; ++l) {
    std::memcpy(slice(pool, l, slot), in.data() + std::size_t(l) * bytes, bytes);
  }
}

struct SwapEngine::State {
  enum class Direction { in, out };

  State(std::shared_ptr<kv::KvPool> d, std::shared_ptr<rt::CpuStreamPool> streams, rt::TaskGroup& g,
        asio::any_io_executor ex, SwapEngineConfig c)
      : device_owner(std::move(d)),
        device(*device_owner),
        config(std::move(c)),
        host(host_config(device.config(), config.host_slots)),
        group(g),
        executor(std::move(ex)),
        stream_pool(std::move(streams)),
        // Spans come from the copies themselves (per layer), not per item.
        copy_in(*stream_pool, rt::trace_names::copy_stream, nullptr),
        copy_out(*stream_pool, rt::trace_names::copy_stream, nullptr) {
    stats.host_slots = config.host_slots;
    stats.disk_slots = config.disk ? config.disk->slots() : 0;
  }

  std::vector<rt::Event> enqueue(Direction dir, const std::vector<DeviceHostCopy>& copies, std::uint64_t iteration);
  void copy_layer(Direction dir, std::int32_t layer, const std::vector<ChunkRun>& runs, std::uint64_t iteration);
  // Coroutines that hold their state alive (a member coroutine's `this` would not).
  struct DiskBatch {
    TransfersDone done;
    std::size_t remaining = 0;
  };
  static asio::awaitable<void> disk_moves(std::shared_ptr<State> self, rt::Event after,
                                          std::vector<HostDiskCopy> spill, std::vector<HostDiskCopy> restore);
  static asio::awaitable<void> disk_move(std::shared_ptr<State> self, std::shared_ptr<DiskBatch> batch,
                                         HostDiskCopy c, bool spill);
  void report(TransfersDone done) {
    if (config.report) config.report(std::move(done));
  }
  std::size_t chunk_bytes() const { return slice_bytes(host) * std::size_t(host.config().n_layers); }

  std::shared_ptr<kv::KvPool> device_owner;
  kv::KvPool& device;
  SwapEngineConfig config;
  kv::KvPool host;
  rt::TaskGroup& group;
  asio::any_io_executor executor;
  SwapStats stats;                              // on the handler's executor
  std::atomic<std::int64_t> swap_in_ns{0};      // the copy streams' busy time
  std::atomic<std::int64_t> swap_out_ns{0};
  std::shared_ptr<rt::CpuStreamPool> stream_pool;  // outlives the streams
  // One stream per direction, so a swap-out still copying never delays a
  // later swap-in. Declared last: destroyed first, after their work. Their
  // work items point at this state without owning it, so the state never
  // dies on a stream.
  rt::CpuStream copy_in;
  rt::CpuStream copy_out;
};

void SwapEngine::State::copy_layer(Direction dir, std::int32_t layer, const std::vector<ChunkRun>& runs,
                                   std::uint64_t iteration) {
  const std::string_view name = dir == Direction::in ? "swap_in" : "swap_out";
  if (config.before_copy_layer) config.before_copy_layer(name, layer);
  const std::int64_t start = rt::steady_now_ns();
  const std::size_t bytes = slice_bytes(host);
  // Host slots are the source of a swap_in and the destination of a swap_out.
  const kv::KvPool& src_pool = dir == Direction::in ? host : device;
  kv::KvPool& dst_pool = dir == Direction::in ? device : host;
  // On CUDA each run is one cudaMemcpyAsync on the copy stream (pinned host
  // memory); gathering is what keeps those few and large.
  for (const ChunkRun& r : runs) {
    std::memcpy(slice(dst_pool, layer, r.dst), slice(src_pool, layer, r.src), bytes * r.count);
  }
  const std::int64_t end = rt::steady_now_ns();
  (dir == Direction::in ? swap_in_ns : swap_out_ns).fetch_add(end - start, std::memory_order_relaxed);
  if (config.tracer != nullptr && config.tracer->enabled()) {
    char detail[48];
    std::snprintf(detail, sizeof detail, "layer %d runs %zu it %llu", layer, runs.size(),
                  static_cast<unsigned long long>(iteration));
    rt::SpanRecord span{rt::SpanKind::stream, rt::trace_names::copy_stream, name, std::uint64_t(layer), start, end};
    span.detail = detail;
    config.tracer->record(span);
  }
}

std::vector<rt::Event> SwapEngine::State::enqueue(Direction dir, const std::vector<DeviceHostCopy>& copies,
                                                  std::uint64_t iteration) {
  std::vector<rt::Event> events;
  if (copies.empty()) return events;
  std::vector<SlotCopy> slots;
  slots.reserve(copies.size());
  for (const DeviceHostCopy& c : copies) {
    check_slot(device, c.device.value, "swap engine: device block out of range");
    check_slot(host, c.host.value, "swap engine: host slot out of range");
    slots.push_back(dir == Direction::in ? SlotCopy{c.host.value, c.device.value}
                                         : SlotCopy{c.device.value, c.host.value});
  }
  auto runs = std::make_shared<const std::vector<ChunkRun>>(plan_chunk_runs(slots, config.gather));
  const std::int32_t layers = host.config().n_layers;
  const auto bytes = std::int64_t(slice_bytes(host)) * layers * std::int64_t(copies.size());
  if (dir == Direction::in) {
    stats.swap_in_chunks += std::int64_t(copies.size());
    stats.swap_in_bytes += bytes;
  } else {
    stats.swap_out_chunks += std::int64_t(copies.size());
    stats.swap_out_bytes += bytes;
  }
  stats.copy_runs += std::int64_t(runs->size()) * layers;
  events.reserve(std::size_t(layers));
  for (std::int32_t l = 0; l < layers; ++l) {
    // The stream's work outlives nothing it points to: the stream is this
    // state's last member, destroyed (after its work) first.
    rt::CpuStream& stream = dir == Direction::in ? copy_in : copy_out;
    stream.enqueue([this, dir, l, runs, iteration] { copy_layer(dir, l, *runs, iteration); },
                   dir == Direction::in ? "swap_in" : "swap_out");
    events.push_back(stream.record());
  }
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
  for (HostDiskCopy& c : spill) s.group.spawn(s.executor, disk_move(self, batch, std::move(c), true));
  for (HostDiskCopy& c : restore) s.group.spawn(s.executor, disk_move(self, batch, std::move(c), false));
}

asio::awaitable<void> SwapEngine::State::disk_move(std::shared_ptr<State> self, std::shared_ptr<DiskBatch> batch,
                                                   HostDiskCopy c, bool spill) {
  State& s = *self;
  const std::int64_t start = rt::steady_now_ns();
  const auto bytes = std::int64_t(s.chunk_bytes());
  if (spill) {
    auto written = co_await s.config.disk->write(c.disk, s.host, c.host, c.tokens);
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
    auto read = co_await s.config.disk->read(c.disk, s.host, c.host, c.tokens);
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
  }
  if (s.config.tracer != nullptr) {
    s.config.tracer->record({rt::SpanKind::file_io, rt::trace_names::swap_engine, spill ? "spill" : "restore",
                             c.disk.value, start, rt::steady_now_ns()});
  }
  if (--batch->remaining == 0) s.report(std::move(batch->done));
}

SwapEngine::SwapEngine(std::shared_ptr<kv::KvPool> device, std::shared_ptr<rt::CpuStreamPool> streams,
                       rt::TaskGroup& group, asio::any_io_executor executor, SwapEngineConfig config)
    : state_(std::make_shared<State>(std::move(device), std::move(streams), group, std::move(executor),
                                     std::move(config))) {}

kv::KvPool& SwapEngine::host_pool() { return state_->host; }
std::size_t SwapEngine::chunk_bytes() const { return state_->chunk_bytes(); }

void SwapEngine::operator()(SwapIteration m) {
  State& s = *state_;
  KvTransfers& t = m.transfers;
  SwapTicket ticket;
  ticket.layer_ready = s.enqueue(State::Direction::in, t.swap_in, m.iteration);
  // Within an iteration host -> device copies land before device -> host
  // ones start (a block filled and copied out sends what arrived); a later
  // iteration's swap-in never waits for this swap-out.
  if (!t.swap_out.empty() && !ticket.layer_ready.empty()) s.copy_out.wait(ticket.layer_ready.back());
  m.reply.send(std::move(ticket));
  if (!t.swap_out.empty()) {
    s.enqueue(State::Direction::out, t.swap_out, m.iteration);
    // Reported once the copies have run: until then the core keeps both the
    // device block and the host slot out of reach.
    // Holds the state weakly: this callback must not be what destroys it.
    s.copy_out.record().wait(s.executor, [weak = std::weak_ptr<State>(state_), done = std::move(t.swap_out)]() mutable {
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
  s.group.spawn(s.executor, State::disk_moves(state_, s.copy_out.record(), std::move(t.spill), std::move(t.restore)));
}

void SwapEngine::operator()(GetSwapStats m) {
  SwapStats out = state_->stats;
  out.swap_in_ns = state_->swap_in_ns.load(std::memory_order_relaxed);
  out.swap_out_ns = state_->swap_out_ns.load(std::memory_order_relaxed);
  m.reply.send(out);
}

}  // namespace pensieve::actors
