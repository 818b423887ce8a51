// The prefix index's lookup (actors/kv_cache_index.hpp): one stateless
// prompt looked up among N cached unnamed paths of one namespace, for N =
// 100 ... 10,000. The paths share a system-prompt block and diverge in
// their second block, as many clients of one assistant do; the prompt
// continues one of them. The time should not grow with N (a linear scan's
// did: it compared the prompt with every path).
#include "actors/kv_cache_manager.hpp"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace {

using namespace pensieve;
using namespace pensieve::actors;

constexpr std::int32_t kBlockTokens = 32;

std::vector<std::int32_t> path_tokens(std::int32_t i) {
  std::vector<std::int32_t> t(std::size_t(kBlockTokens) * 4);
  std::iota(t.begin(), t.end(), 1);  // the shared first block
  for (std::size_t k = kBlockTokens; k < t.size(); ++k) t[k] = 100000 + i * 7 + std::int32_t(k);
  return t;
}

void BM_PrefixLookup(benchmark::State& state) {
  const auto paths = std::int32_t(state.range(0));
  KvCacheManager kv({.num_blocks = paths * 4, .block_tokens = kBlockTokens}, {});
  std::vector<kv::BlockId> freed;
  for (std::int32_t i = 0; i < paths; ++i) {
    const auto tokens = path_tokens(i);
    kv::BlockTable table(kBlockTokens);
    if (!kv.append(table, std::int64_t(tokens.size()))) {
      state.SkipWithError("too few blocks");
      return;
    }
    kv.put(ConversationId{std::uint64_t(i) + 1}, tokens, std::move(table), i, freed, "ns");
  }
  auto prompt = path_tokens(paths / 2);
  prompt.insert(prompt.end(), {5, 6, 7});
  for (auto _ : state) {
    auto match = kv.find_prefix("ns", prompt, true, std::nullopt);
    benchmark::DoNotOptimize(match);
    if (!match || match->tokens != std::int64_t(kBlockTokens) * 4) state.SkipWithError("wrong match");
  }
  state.counters["paths"] = double(paths);
}
BENCHMARK(BM_PrefixLookup)->Arg(100)->Arg(1000)->Arg(10000);

}  // namespace
