// disk-bench: restore bandwidth of the disk KV tier (gpu/kv/disk_tier_file)
// against the raw bandwidth of the same device for the same bytes, side by
// side in one run. For each chunk shape it writes N chunks from a host
// KvPool, then, for R interleaved repetitions, measures
//   restore: store reads (header, checksum and token checks, scatter into a
//            host pool) with --inflight reads in flight;
//   raw:     an fio-style sequential O_DIRECT read of the same file bytes
//            with --raw-block-kib blocks at queue depth 1 (fio's default
//            job: iodepth=1) and, for reference, at --inflight;
// and prints medians as JSON (--out FILE writes it too). KV bytes per second
// count the chunks' payload; raw counts every byte read.
#include "bench/common/machine_info.hpp"
#include "gpu/kv/disk_tier_file.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace pensieve;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
  std::string name;
  kv::KvPoolConfig pool;
};

struct Args {
  std::string dir = "disk-bench-data";
  std::size_t chunks = 256;
  std::size_t reps = 5;
  std::size_t inflight = 8;
  std::size_t raw_block_kib = 1024;
  std::string shapes = "8b,1b";
  std::optional<std::string> out;
  std::string command;
};

const char* usage =
    "disk-bench [--dir DIR] [--chunks N] [--reps R] [--inflight Q] [--raw-block-kib K]\n"
    "           [--shapes 8b,1b] [--out FILE.json]\n"
    "8b: 32 tokens x 32 layers x 8 KV heads x 128 dims, f16, K and V (4 MiB a chunk);\n"
    "1b: 32 tokens x 22 layers x 4 KV heads x 64 dims, f16 (704 KiB, TinyLlama 1.1B).\n";

std::optional<Args> parse(int argc, char** argv) {
  Args a;
  for (int i = 0; i < argc; ++i) a.command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--help" || i + 1 >= argc) return std::nullopt;
    const std::string v = argv[++i];
    if (k == "--dir") a.dir = v;
    else if (k == "--chunks") a.chunks = std::stoul(v);
    else if (k == "--reps") a.reps = std::stoul(v);
    else if (k == "--inflight") a.inflight = std::stoul(v);
    else if (k == "--raw-block-kib") a.raw_block_kib = std::stoul(v);
    else if (k == "--shapes") a.shapes = v;
    else if (k == "--out") a.out = v;
    else return std::nullopt;
  }
  if (a.chunks == 0 || a.reps == 0 || a.inflight == 0 || a.raw_block_kib == 0) return std::nullopt;
  return a;
}

std::optional<Shape> shape_named(const std::string& name) {
  kv::KvPoolConfig c{.num_blocks = 0, .block_tokens = 32, .n_layers = 32, .n_kv_heads = 8, .head_dim = 128,
                     .dtype = kv::KvDType::f16, .tier = kv::Tier::host, .poison_freed = false};
  if (name == "8b") return Shape{"8b: 32 layers x 8 KV heads x 128 dims, f16, 32 tokens", c};
  if (name == "1b") {
    c.n_layers = 22;
    c.n_kv_heads = 4;
    c.head_dim = 64;
    return Shape{"1b: 22 layers x 4 KV heads x 64 dims, f16, 32 tokens", c};
  }
  return std::nullopt;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Runs `workers` copies of `work(index)` over indices [0, n), at most
// `workers` at once, on the calling coroutine's executor.
template <class Work>
asio::awaitable<void> run_parallel(std::size_t n, std::size_t workers, Work work) {
  auto ex = co_await asio::this_coro::executor;
  std::size_t next = 0, running = 0;
  asio::steady_timer done(ex, asio::steady_timer::time_point::max());
  auto worker = [&]() -> asio::awaitable<void> {
    for (;;) {
      const std::size_t i = next++;
      if (i >= n) break;
      co_await work(i);
    }
    if (--running == 0) done.cancel();
  };
  running = std::min(workers, n);
  const std::size_t started = running;
  for (std::size_t w = 0; w < started; ++w) asio::co_spawn(ex, worker(), asio::detached);
  if (started > 0) {
    auto [ec] = co_await done.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;
  }
}

struct ShapeResult {
  double write_gbps = 0;
  std::vector<double> restore_gbps, raw_qd1_gbps, raw_qdn_gbps;
  std::size_t failures = 0;
};

std::vector<std::int32_t> tokens_of(std::size_t chunk) {
  std::vector<std::int32_t> t(32);
  for (std::size_t k = 0; k < t.size(); ++k) t[k] = std::int32_t(chunk * 32 + k);
  return t;
}

// Parameters by reference: GCC 12 mishandles some by-value coroutine parameters.
// Chunk i goes from block i % blocks of `source` to slot i; returns KV GB/s.
asio::awaitable<double> write_all(kv::DiskTierFile& store, const kv::KvPool& source, const Args& args,
                                  std::size_t& failures) {
  const auto blocks = std::size_t(source.config().num_blocks);
  const auto start = Clock::now();
  co_await run_parallel(args.chunks, args.inflight, [&](std::size_t i) -> asio::awaitable<void> {
    const auto tokens = tokens_of(i);
    const auto r = co_await store.write(kv::DiskSlot{std::uint32_t(i)}, source, kv::BlockId{std::uint32_t(i % blocks)},
                                        tokens);
    if (!r) ++failures;
  });
  co_return double(store.payload_bytes()) * double(args.chunks) / seconds_since(start) / 1e9;
}

// Reads every chunk back, in `order`, into `dest`; returns KV GB/s.
asio::awaitable<double> restore_all(kv::DiskTierFile& store, kv::KvPool& dest, const std::vector<std::size_t>& order,
                                    std::size_t inflight, std::size_t& failures) {
  const auto blocks = std::size_t(dest.config().num_blocks);
  const auto start = Clock::now();
  co_await run_parallel(order.size(), inflight, [&](std::size_t k) -> asio::awaitable<void> {
    const std::size_t i = order[k];
    const auto tokens = tokens_of(i);
    const auto r = co_await store.read(kv::DiskSlot{std::uint32_t(i)}, dest, kv::BlockId{std::uint32_t(k % blocks)},
                                       tokens);
    if (!r) ++failures;
  });
  co_return double(store.payload_bytes()) * double(order.size()) / seconds_since(start) / 1e9;
}

// fio-style: `file_bytes` of `file` in order, in blocks of buffers' size, at
// queue depth `depth` (<= buffers.size()); returns GB/s.
asio::awaitable<double> raw_read(rt::UringFile& file, std::vector<rt::AlignedBuffer>& buffers, std::size_t file_bytes,
                                 std::size_t depth, std::size_t& failures) {
  const std::size_t block = buffers.front().size();
  std::size_t calls = 0;  // at most `depth` calls overlap, so no two share a buffer
  const auto start = Clock::now();
  co_await run_parallel((file_bytes + block - 1) / block, depth, [&](std::size_t i) -> asio::awaitable<void> {
    auto& buf = buffers[(calls++) % buffers.size()];
    const std::size_t length = std::min(block, file_bytes - i * block);
    const auto r = co_await file.read_at(i * block, std::span<std::byte>(buf.data(), length));
    if (!r) ++failures;
  });
  co_return double(file_bytes) / seconds_since(start) / 1e9;
}

asio::awaitable<ShapeResult> measure(const std::shared_ptr<rt::IoRing>& ring, const Args& args, const Shape& shape,
                                     bool& direct, std::string& note, std::uint64_t& slot_bytes) {
  ShapeResult out;
  kv::KvPoolConfig pool = shape.pool;
  pool.num_blocks = std::int32_t(std::min<std::size_t>(args.chunks, 64));
  kv::KvPool source(pool);
  kv::KvPool dest(pool);
  std::mt19937 rng(1);
  for (std::int32_t l = 0; l < pool.n_layers; ++l) {
    auto* p = static_cast<std::uint32_t*>(source.layer(l).data);
    for (std::size_t i = 0; i < source.layer_bytes() / 4; ++i) p[i] = rng();
  }
  kv::DiskTierFileConfig config = kv::disk_layout_of(pool);
  config.dir = args.dir;
  const std::uint64_t slot = rt::AlignedBuffer::round_up(4096 + config.n_layers * config.layer_bytes, 4096);
  config.budget_bytes = slot * args.chunks;
  auto opened = kv::DiskTierFile::open(ring, config);
  if (!opened) throw std::runtime_error(opened.error().message);
  auto& store = **opened;
  direct = store.direct();
  note = store.direct_note();
  slot_bytes = store.slot_bytes();
  out.write_gbps = co_await write_all(store, source, args, out.failures);
  // The raw file, opened apart, O_DIRECT like the store.
  auto raw = rt::UringFile::open(ring, store.path().string(), {.direct = rt::DirectIo::prefer});
  if (!raw) throw std::runtime_error(raw.error().message);
  std::vector<rt::AlignedBuffer> buffers;
  for (std::size_t i = 0; i < args.inflight; ++i) buffers.emplace_back(args.raw_block_kib * 1024);
  std::vector<std::size_t> order(args.chunks);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (std::size_t rep = 0; rep < args.reps; ++rep) {
    // A shuffled order: a returning conversation's chunks are anywhere.
    std::shuffle(order.begin(), order.end(), rng);
    const double restore = co_await restore_all(store, dest, order, args.inflight, out.failures);
    out.restore_gbps.push_back(restore);
    const double qd1 = co_await raw_read(*raw, buffers, store.slot_bytes() * args.chunks, 1, out.failures);
    out.raw_qd1_gbps.push_back(qd1);
    const double qdn = co_await raw_read(*raw, buffers, store.slot_bytes() * args.chunks, args.inflight, out.failures);
    out.raw_qdn_gbps.push_back(qdn);
  }
  co_return out;
}

json::array numbers(const std::vector<double>& v) {
  json::array a;
  for (double x : v) a.push_back(std::round(x * 1000) / 1000);
  return a;
}

json::object shape_json(const Args& args, const Shape& shape, const ShapeResult& r, std::uint64_t slot_bytes,
                        const std::string& io_note) {
  auto rounded = [](double x) { return std::round(x * 1000) / 1000; };
  const std::string qdn = "qd" + std::to_string(args.inflight);
  json::object s;
  s["shape"] = shape.name;
  s["chunk_bytes"] = kv::kv_bytes_per_token(shape.pool) * std::size_t(shape.pool.block_tokens);
  s["slot_bytes"] = slot_bytes;
  s["chunks"] = args.chunks;
  s["inflight"] = args.inflight;
  s["raw_block_bytes"] = args.raw_block_kib * 1024;
  s["io"] = io_note;
  s["failures"] = r.failures;
  s["write_kv_gbps"] = rounded(r.write_gbps);
  s["restore_kv_gbps"] = numbers(r.restore_gbps);
  s["raw_qd1_gbps"] = numbers(r.raw_qd1_gbps);
  s["raw_" + qdn + "_gbps"] = numbers(r.raw_qdn_gbps);
  const double restore = median(r.restore_gbps), raw1 = median(r.raw_qd1_gbps), rawn = median(r.raw_qdn_gbps);
  s["median_restore_kv_gbps"] = rounded(restore);
  s["median_raw_qd1_gbps"] = rounded(raw1);
  s["median_raw_" + qdn + "_gbps"] = rounded(rawn);
  s["restore_over_raw_qd1"] = rounded(restore / raw1);
  s["restore_over_raw_same_depth"] = rounded(restore / rawn);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = parse(argc, argv);
  if (!args) {
    std::fputs(usage, stderr);
    return 2;
  }
  asio::io_context io;
  auto ring = rt::IoRing::create(io.get_executor(), 256);
  if (!ring) {
    std::fprintf(stderr, "disk-bench: %s\n", ring.error().message.c_str());
    return 1;
  }
  const auto machine = bench::machine_info();
  json::object result;
  result["command"] = args->command;
  result["dir"] = args->dir;
  result["cpu"] = machine.cpu_model;
  result["hardware_threads"] = machine.hardware_threads;
  result["load_average_before"] = bench::load_average();
  json::array shapes;
  int rc = 0;
  std::size_t start = 0;
  while (start <= args->shapes.size()) {
    const std::size_t comma = std::min(args->shapes.find(',', start), args->shapes.size());
    const std::string name = args->shapes.substr(start, comma - start);
    start = comma + 1;
    const auto shape = shape_named(name);
    if (!shape) {
      std::fprintf(stderr, "disk-bench: unknown shape '%s'\n%s", name.c_str(), usage);
      return 2;
    }
    bool direct = false;
    std::string note;
    std::uint64_t slot_bytes = 0;
    auto f = asio::co_spawn(io, measure(*ring, *args, *shape, direct, note, slot_bytes), asio::use_future);
    io.restart();
    io.run();
    const ShapeResult r = f.get();
    json::object s = shape_json(*args, *shape, r, slot_bytes, note);
    if (!direct) s["warning"] = "no O_DIRECT: reads may come from the page cache";
    if (r.failures > 0) rc = 1;
    shapes.push_back(std::move(s));
  }
  result["shapes"] = std::move(shapes);
  result["load_average_after"] = bench::load_average();
  const std::string text = json::serialize(result);
  std::printf("%s\n", text.c_str());
  if (args->out) {
    std::ofstream(*args->out) << text << "\n";
  }
  return rc;
}
