// The engine on the CUDA backend (--backend cuda): a stateful two-turn
// conversation on stories260K, greedy, gives the CPU backend's tokens, and
// the second turn reuses the first turn's KV on the device; with Q8_0 and FP8
// KV the share of equal greedy tokens is measured. [gpu]: run from
// tests/gpu/device-checks.sh; exits as SKIPPED (77) without a device.
#ifdef PENSIEVE_HAVE_CUDA
#include "tests/actors/engine_fixture.hpp"
#include "tests/gpu/cuda_test_support.hpp"

using namespace pensieve;
using namespace pensieve::testing;

namespace {

std::map<std::string, ConversationRecord> two_turns(backend::BackendKind kind, kv::KvDType kv_dtype = kv::KvDType::f16) {
  asio::io_context io;  // outlives the engine
  actors::EngineOptions o;
  o.n_threads = 2;
  o.backend = kind;
  o.kv_cache_mb = 16;
  // F16 by default: CUDA then computes in F16 (closer to the CPU's F32 than BF16).
  o.kv_dtype = kv_dtype;
  auto engine = actors::Engine::create(stories_model(), o);
  INFO((engine ? std::string() : engine.error().message));
  REQUIRE(engine.has_value());
  const std::vector<std::vector<std::string>> convs = {{"Once upon a time", "and then the cat"},
                                                       {"Lily saw a big dog", "What happened next?"}};
  return play_all(**engine, io, convs, 24, true);
}

}  // namespace

TEST_CASE("a stateful two-turn conversation on the CUDA backend gives the CPU backend's tokens", "[gpu][engine]") {
  require_cuda_device();
  const auto cpu = two_turns(backend::BackendKind::cpu);
  const auto gpu = two_turns(backend::BackendKind::cuda);
  REQUIRE(cpu.size() == gpu.size());
  std::size_t same = 0, total = 0;
  for (const auto& [id, rec] : cpu) {
    const ConversationRecord& other = gpu.at(id);
    INFO("conversation " << id);
    REQUIRE(other.turns.size() == rec.turns.size());
    for (std::size_t t = 0; t < rec.turns.size(); ++t) {
      INFO("turn " << t);
      CHECK(other.turns[t].tokens == rec.turns[t].tokens);
      CHECK(other.turns[t].summary.cached_tokens == rec.turns[t].summary.cached_tokens);
      for (std::size_t i = 0; i < std::min(rec.turns[t].tokens.size(), other.turns[t].tokens.size()); ++i) {
        same += rec.turns[t].tokens[i] == other.turns[t].tokens[i];
      }
      total += rec.turns[t].tokens.size();
    }
    CHECK(other.turns[1].summary.cached_tokens > 0);  // turn 2 reused turn 1's device KV
  }
  report_metric("engine_cuda_tokens_equal_share", total ? double(same) / double(total) : 0.0);
}

TEST_CASE("stateful two-turn conversations with Q8_0 and FP8 KV on the CUDA backend stay with the CPU backend's tokens",
          "[gpu][engine][q8_0][fp8]") {
  // The CPU pass computes in F32, the CUDA one in BF16 (a quantised KV keeps
  // BF16's range), so a K/V value near a quantisation boundary may round the
  // other way: the share of equal tokens is measured, not required whole.
  require_cuda_device();
  for (kv::KvDType t : {kv::KvDType::q8_0, kv::KvDType::fp8}) {
    const auto cpu = two_turns(backend::BackendKind::cpu, t);
    const auto gpu = two_turns(backend::BackendKind::cuda, t);
    REQUIRE(cpu.size() == gpu.size());
    std::size_t same = 0, total = 0;
    for (const auto& [id, rec] : cpu) {
      const ConversationRecord& other = gpu.at(id);
      INFO("conversation " << id << " kv " << kv::kv_dtype_name(t));
      REQUIRE(other.turns.size() == rec.turns.size());
      for (std::size_t turn = 0; turn < rec.turns.size(); ++turn) {
        // Greedy tokens agree up to the first difference; count that prefix.
        const auto& a = rec.turns[turn].tokens;
        const auto& b = other.turns[turn].tokens;
        std::size_t i = 0;
        while (i < std::min(a.size(), b.size()) && a[i] == b[i]) ++i;
        same += i;
        total += a.size();
      }
      CHECK(other.turns[1].summary.cached_tokens > 0);  // turn 2 reused turn 1's device KV
    }
    const double share = total ? double(same) / double(total) : 0.0;
    report_metric((std::string("engine_cuda_tokens_equal_prefix_share.") + kv::kv_dtype_name(t)).c_str(), share);
    CHECK(share >= 0.5);
  }
}

TEST_CASE("the CUDA backend refuses a disk tier without a host tier at start-up with one line", "[gpu][engine][errors]") {
  require_cuda_device();
  actors::EngineOptions o;
  o.n_threads = 2;
  o.backend = backend::BackendKind::cuda;
  o.kv_cache_mb = 16;
  o.kv_dtype = kv::KvDType::f16;
  o.kv_disk_dir = "/nonexistent-never-opened";
  o.kv_disk_gb = 1;
  o.kv_host_mb = 0;  // the pinned host tier works on CUDA (cuda_swap_test.cpp); without it the disk is unfed
  auto disk = actors::Engine::create(stories_model(), o);
  REQUIRE_FALSE(disk.has_value());
  INFO(disk.error().message);
  CHECK(disk.error().message.find("--kv-host-mb 0 leaves it no block") != std::string::npos);
  CHECK(disk.error().message.find('\n') == std::string::npos);
}
#endif
