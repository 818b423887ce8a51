// The host KV tier on the CUDA backend: conversations whose KV does not fit
// the device budget are swapped out to pinned host memory over the copy-out
// stream and back over the copy-in stream (each layer's copy gated by a CUDA
// event on the compute stream), and their greedy tokens equal the CPU
// backend's under the same budgets. [gpu]: run from tests/gpu/device-checks.sh;
// exits as SKIPPED (77) without a device. And the swap bandwidth with the
// gather kernel on (small scattered runs in one launch) and off (every run a
// cudaMemcpyAsync), which device-checks.sh sets against the pinned copy
// bandwidth.
#ifdef PENSIEVE_HAVE_CUDA
#include "tests/actors/engine_fixture.hpp"
#include "tests/gpu/cuda_test_support.hpp"
#include "tests/temp_dir.hpp"

#include <cstdlib>
#include <string_view>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

struct Played {
  std::map<std::string, ConversationRecord> records;
  actors::SwapStats swap;
};

// `disk`: a host tier of a few chunks over a disk tier, and idle KV leaves
// the device and the host as soon as it can (device -> pinned host -> disk
// through io_uring, and back).
// The gather kernel's setting when a test does not choose: device-checks.sh
// --swap-gather off|auto sets PENSIEVE_SWAP_GATHER for the whole [gpu] run.
bool gather_kernel_default() {
  const char* v = std::getenv("PENSIEVE_SWAP_GATHER");
  return v == nullptr || std::string_view(v) != "off";
}

Played tiered(backend::BackendKind kind, const TempDir* disk, bool gather_kernel = gather_kernel_default()) {
  asio::io_context io;  // outlives the engine
  actors::EngineOptions o;
  o.n_threads = 2;
  o.backend = kind;
  o.kv_dtype = kv::KvDType::f16;
  o.kv_block_tokens = 16;
  o.kv_device_blocks = 24;  // about one conversation: the others wait on the host
  o.kv_host_blocks = 256;
  o.swap_gather_kernel = gather_kernel;
  if (disk != nullptr) {
    o.kv_host_blocks = 4;
    o.kv_disk_dir = (*disk / (kind == backend::BackendKind::cuda ? "kv-cuda" : "kv-cpu")).string();
    o.kv_disk_bytes = 64 * 24576;
    o.kv_cache.swap_out_watermark = 1.0;
  }
  auto engine = actors::Engine::create(stories_model(), o);
  INFO((engine ? std::string() : engine.error().message));
  REQUIRE(engine.has_value());
  std::vector<std::vector<std::string>> convs;
  for (int i = 0; i < 6; ++i) {
    convs.push_back({"Once upon a time " + std::to_string(i), "and then the cat", "What happened next?"});
  }
  Played p;
  p.records = play_all(**engine, io, convs, 24, true);
  auto f = asio::co_spawn(io, (*engine)->swap_stats(), asio::use_future);
  io.restart();
  io.run();
  p.swap = f.get();
  return p;
}

}  // namespace

TEST_CASE("the pinned host tier on CUDA swaps conversations out and in and keeps the CPU backend's tokens",
          "[gpu][engine][swap]") {
  require_cuda_device();
  const bool with_disk = GENERATE(false, true);
  INFO("disk tier " << with_disk);
  TempDir dir("cuda-swap");
  const Played cpu = tiered(backend::BackendKind::cpu, with_disk ? &dir : nullptr);
  const Played gpu = tiered(backend::BackendKind::cuda, with_disk ? &dir : nullptr);
  CHECK(gpu.swap.swap_out_chunks > 0);
  CHECK(gpu.swap.swap_in_chunks > 0);
  if (with_disk) {
    CHECK(gpu.swap.spill_chunks > 0);
    CHECK(gpu.swap.restore_chunks > 0);
    CHECK(gpu.swap.restore_corrupt == 0);
  }
  std::size_t same = 0, total = 0;
  for (const auto& [id, rec] : cpu.records) {
    const ConversationRecord& other = gpu.records.at(id);
    INFO("conversation " << id);
    REQUIRE(other.turns.size() == rec.turns.size());
    for (std::size_t t = 0; t < rec.turns.size(); ++t) {
      INFO("turn " << t);
      CHECK(other.turns[t].tokens == rec.turns[t].tokens);
      for (std::size_t i = 0; i < std::min(rec.turns[t].tokens.size(), other.turns[t].tokens.size()); ++i) {
        same += rec.turns[t].tokens[i] == other.turns[t].tokens[i];
      }
      total += rec.turns[t].tokens.size();
    }
  }
  const std::string tier = with_disk ? "disk" : "host";
  report_metric(("engine_cuda_swap_tokens_equal_share." + tier).c_str(), total ? double(same) / double(total) : 0.0);
  report_metric(("engine_cuda_swap_in_chunks." + tier).c_str(), double(gpu.swap.swap_in_chunks));
  if (!with_disk && gpu.swap.swap_in_ns > 0) {
    report_metric("engine_cuda_swap_in_GBps", double(gpu.swap.swap_in_bytes) / double(gpu.swap.swap_in_ns));
  }
}
TEST_CASE("the pinned host tier's swap bandwidth on CUDA with the gather kernel on and off, same tokens",
          "[gpu][engine][swap][swap_gather]") {
  require_cuda_device();
  const Played on = tiered(backend::BackendKind::cuda, nullptr, true);
  const Played off = tiered(backend::BackendKind::cuda, nullptr, false);
  CHECK(off.swap.gather_launches == 0);
  REQUIRE(on.swap.swap_in_chunks > 0);
  REQUIRE(off.swap.swap_in_chunks > 0);
  for (const auto& [id, rec] : on.records) {
    INFO("conversation " << id);
    const ConversationRecord& other = off.records.at(id);
    REQUIRE(other.turns.size() == rec.turns.size());
    for (std::size_t t = 0; t < rec.turns.size(); ++t) CHECK(other.turns[t].tokens == rec.turns[t].tokens);
  }
  for (const auto& [mode, p] : {std::pair{"auto", &on}, std::pair{"off", &off}}) {
    const actors::SwapStats& s = p->swap;
    if (s.swap_in_ns > 0) {
      report_metric((std::string("engine_cuda_swap_in_GBps.gather_") + mode).c_str(),
                    double(s.swap_in_bytes) / double(s.swap_in_ns));
    }
    if (s.swap_out_ns > 0) {
      report_metric((std::string("engine_cuda_swap_out_GBps.gather_") + mode).c_str(),
                    double(s.swap_out_bytes) / double(s.swap_out_ns));
    }
    report_metric((std::string("engine_cuda_swap_gather_launches.gather_") + mode).c_str(),
                  double(s.gather_launches));
    report_metric((std::string("engine_cuda_swap_dma_copies.gather_") + mode).c_str(), double(s.copy_runs));
  }
}
#endif
