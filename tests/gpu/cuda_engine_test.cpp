// The engine on the CUDA backend (--backend cuda): a stateful two-turn
// conversation on stories260K, greedy, gives the CPU backend's tokens, and
// the second turn reuses the first turn's KV on the device. [gpu]: run from
// tests/gpu/device-checks.sh; exits as SKIPPED (77) without a device.
#ifdef PENSIEVE_HAVE_CUDA
#include "tests/actors/engine_fixture.hpp"
#include "tests/gpu/cuda_test_support.hpp"

using namespace pensieve;
using namespace pensieve::testing;

namespace {

std::map<std::string, ConversationRecord> two_turns(backend::BackendKind kind) {
  asio::io_context io;  // outlives the engine
  actors::EngineOptions o;
  o.n_threads = 2;
  o.backend = kind;
  o.kv_cache_mb = 16;
  o.kv_dtype = kv::KvDType::f16;  // CUDA computes in F16 (closer to the CPU's F32 than BF16)
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

TEST_CASE("the CUDA backend refuses Q8_0 KV, and a disk tier without a host tier, at start-up with one line each", "[gpu][engine][errors]") {
  require_cuda_device();
  actors::EngineOptions o;
  o.n_threads = 2;
  o.backend = backend::BackendKind::cuda;
  o.kv_cache_mb = 16;
  o.kv_dtype = kv::KvDType::q8_0;
  auto q8 = actors::Engine::create(stories_model(), o);
  REQUIRE_FALSE(q8.has_value());
  INFO(q8.error().message);
  CHECK(q8.error().message.starts_with("--backend cuda: --kv-dtype q8_0 runs on the CPU backend only"));
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
