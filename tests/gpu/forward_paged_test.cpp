// The CPU forward pass over a paged KV pool (the serving path) against the
// contiguous one: same logits bit for bit with an F32 pool, whatever the
// physical block order, the chunking or the rest of the batch.
#include "gpu/kv/kv_cache.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/llama2c_loader.hpp"
#include "tests/shared_data.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

using namespace pensieve;
using namespace pensieve::model;

namespace {

CpuForward stories_forward() {
  auto weights = load_llama2c(testing::shared_file("models/stories260K.bin"));
  REQUIRE(weights.has_value());
  auto fwd = CpuForward::create(std::move(*weights), {.n_threads = 2, .min_parallel_cost = 0});
  REQUIRE(fwd.has_value());
  return std::move(*fwd);
}

std::vector<std::int32_t> prompt_of(std::size_t n, std::int32_t salt) {
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = std::int32_t((i * 37 + std::size_t(salt) * 11 + 5) % 500) + 3;
  return t;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Logits after each of `steps` greedy decode steps, on a contiguous cache.
std::vector<std::vector<float>> contiguous_run(CpuForward& fwd, const std::vector<std::int32_t>& prompt,
                                               int steps) {
  ContiguousKvCache kv = fwd.make_kv_cache(std::int32_t(prompt.size()) + steps + 1);
  std::vector<std::vector<float>> out;
  ForwardSequence seq{prompt, 0, &kv, false};
  auto r = fwd.forward(std::span(&seq, 1));
  REQUIRE(r.has_value());
  out.emplace_back(r->last(0).begin(), r->last(0).end());
  for (int s = 0; s < steps; ++s) {
    const auto next = std::int32_t(std::max_element(out.back().begin(), out.back().end()) - out.back().begin());
    ForwardSequence d{std::span(&next, 1), kv.size_tokens(), &kv, false};
    auto rd = fwd.forward(std::span(&d, 1));
    REQUIRE(rd.has_value());
    out.emplace_back(rd->last(0).begin(), rd->last(0).end());
  }
  return out;
}

}  // namespace

TEST_CASE("paged forward gives the contiguous forward's logits bit for bit, chunked and batched",
          "[forward][paged]") {
  CpuForward fwd = stories_forward();
  const std::vector<std::vector<std::int32_t>> prompts = {prompt_of(70, 1), prompt_of(5, 2), prompt_of(33, 3)};
  const int steps = 6;
  std::vector<std::vector<std::vector<float>>> expected;
  for (const auto& p : prompts) expected.push_back(contiguous_run(fwd, p, steps));

  // 8-token blocks handed out in a shuffled order, so logical and physical
  // order differ; prefill in 16-token chunks, all sequences in every batch.
  kv::KvCache cache(fwd.kv_pool_config(64, 8));
  auto free_ids = cache.allocator().allocate_n(64);
  REQUIRE(free_ids.has_value());
  for (std::size_t i = 0; i < free_ids->size(); ++i) cache.allocator().release((*free_ids)[(i * 29) % 64]);
  std::vector<kv::BlockTable> tables;
  std::vector<std::vector<std::int32_t>> fed(prompts.size());  // tokens whose KV is stored
  std::vector<std::vector<std::vector<float>>> got(prompts.size());
  for (std::size_t s = 0; s < prompts.size(); ++s) tables.push_back(cache.new_sequence());
  std::vector<std::vector<std::int32_t>> pending = prompts;  // tokens to feed next
  for (int iteration = 0; iteration < 40; ++iteration) {
    std::vector<PagedSequence> batch;
    std::vector<std::size_t> who;
    std::vector<std::vector<std::int32_t>> chunks;
    chunks.reserve(prompts.size());
    for (std::size_t s = 0; s < prompts.size(); ++s) {
      if (pending[s].empty() || got[s].size() > std::size_t(steps)) continue;
      const std::size_t n = std::min<std::size_t>(16, pending[s].size());
      chunks.emplace_back(pending[s].begin(), pending[s].begin() + std::ptrdiff_t(n));
      pending[s].erase(pending[s].begin(), pending[s].begin() + std::ptrdiff_t(n));
      REQUIRE(cache.append(tables[s], std::int64_t(n)));
      batch.push_back({chunks.back(), std::int32_t(fed[s].size()), tables[s].blocks(), false});
      fed[s].insert(fed[s].end(), chunks.back().begin(), chunks.back().end());
      who.push_back(s);
    }
    if (batch.empty()) break;
    auto r = fwd.forward_paged(batch, cache.pool());
    REQUIRE(r.has_value());
    for (std::size_t b = 0; b < who.size(); ++b) {
      const std::size_t s = who[b];
      if (!pending[s].empty()) continue;  // mid-prompt chunk: no sample yet
      auto row = r->last(b);
      got[s].emplace_back(row.begin(), row.end());
      pending[s] = {std::int32_t(std::max_element(row.begin(), row.end()) - row.begin())};
    }
  }
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    REQUIRE(got[s].size() == expected[s].size());
    for (std::size_t step = 0; step < got[s].size(); ++step) {
      float max_diff = 0;
      for (std::size_t i = 0; i < got[s][step].size(); ++i) max_diff = std::max(max_diff, std::abs(got[s][step][i] - expected[s][step][i]));
      INFO("sequence " << s << " step " << step << " max diff " << max_diff);
      CHECK(same_bits(got[s][step], expected[s][step]));
    }
  }
}

TEST_CASE("paged forward refuses blocks too few for the new tokens and leaves the pool alone",
          "[forward][paged]") {
  CpuForward fwd = stories_forward();
  kv::KvCache cache(fwd.kv_pool_config(4, 8));
  auto table = cache.new_sequence();
  REQUIRE(cache.append(table, 8));
  const auto prompt = prompt_of(9, 4);
  PagedSequence seq{prompt, 0, table.blocks(), false};
  auto r = fwd.forward_paged(std::span(&seq, 1), cache.pool());
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Catch::Contains("hold fewer than 9 tokens"));
  const std::int32_t bad = 100000;
  PagedSequence bad_token{std::span(&bad, 1), 0, table.blocks(), false};
  const bool accepted = bool(fwd.forward_paged(std::span(&bad_token, 1), cache.pool()));
  CHECK_FALSE(accepted);
}
