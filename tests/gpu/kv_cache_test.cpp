#include "gpu/kv/kv_cache.hpp"
#include "gpu/kernels/cpu/reshape_and_cache.hpp"
#include "gpu/formats/half.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <iterator>
#include <random>
#include <numeric>

using namespace pensieve;
using namespace pensieve::kv;

namespace {

KvPoolConfig small_config(KvDType dtype = KvDType::f32) {
  KvPoolConfig c;
  c.num_blocks = 6;
  c.block_tokens = 4;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 3;
  c.dtype = dtype;
  c.poison_freed = true;
  return c;
}

// Writes tokens whose every K element is `base + token index` (V: negated) into every layer.
void write_tokens(KvCache& cache, const std::vector<std::int64_t>& slots, float base) {
  const auto& c = cache.pool().config();
  const std::size_t row = std::size_t(c.n_kv_heads * c.head_dim);
  std::vector<float> k(slots.size() * row), v(k.size());
  for (std::size_t t = 0; t < slots.size(); ++t) {
    for (std::size_t i = 0; i < row; ++i) {
      k[t * row + i] = base + float(t);
      v[t * row + i] = -(base + float(t));
    }
  }
  for (std::int32_t l = 0; l < c.n_layers; ++l) {
    kernels::ReshapeAndCacheParams p{k.data(),
                                     v.data(),
                                     KvDType::f32,
                                     slots.data(),
                                     std::int32_t(slots.size()),
                                     cache.pool().layer(l)};
    kernels::cpu::reshape_and_cache(p);
  }
}

float read_k(const KvCache& cache, std::int32_t layer, std::int64_t slot, std::int32_t head,
             std::int32_t d, int which = 0) {
  const PagedKvView v = cache.pool().layer(layer);
  const auto off = v.offset(std::int32_t(slot / v.block_tokens), which,
                            std::int32_t(slot % v.block_tokens), head) +
                   d;
  if (v.dtype == KvDType::f16) return f16_to_f32(static_cast<const std::uint16_t*>(v.data)[off]);
  return static_cast<const float*>(v.data)[off];
}

}  // namespace

TEST_CASE("bytes per token count every layer, K and V, in the pool's dtype", "[kv]") {
  CHECK(kv_bytes_per_token(small_config()) == 2 * 2 * 2 * 3 * 4);
  CHECK(kv_bytes_per_token(small_config(KvDType::f16)) == 2 * 2 * 2 * 3 * 2);
  KvPool pool(small_config());
  CHECK(pool.layer_bytes() == 6 * 2 * 4 * 2 * 3 * 4);
  CHECK(pool.total_bytes() == 2 * pool.layer_bytes());
}

TEST_CASE("copy-on-write keeps the other sharer's data intact", "[kv]") {
  KvCache cache(small_config());
  BlockTable parent = cache.new_sequence();
  const auto parent_slots = *cache.append(parent, 6);
  write_tokens(cache, parent_slots, 10.0f);
  BlockTable child = cache.fork(parent);
  // The child diverges at token 6: its tail block is copied first.
  const auto child_slots = *cache.append(child, 2);
  CHECK(child.blocks()[1] != parent.blocks()[1]);
  write_tokens(cache, child_slots, 100.0f);
  const auto more_parent = *cache.append(parent, 1);
  write_tokens(cache, more_parent, 50.0f);
  for (std::int32_t layer = 0; layer < 2; ++layer) {
    for (std::int64_t pos = 0; pos < 6; ++pos) {  // the shared history, in both
      CHECK(read_k(cache, layer, parent.slot(pos), 1, 2) == 10.0f + float(pos));
      CHECK(read_k(cache, layer, child.slot(pos), 1, 2) == 10.0f + float(pos));
      CHECK(read_k(cache, layer, child.slot(pos), 0, 0, 1) == -(10.0f + float(pos)));
    }
    CHECK(read_k(cache, layer, parent.slot(6), 0, 1) == 50.0f);
    CHECK(read_k(cache, layer, child.slot(6), 0, 1) == 100.0f);
    CHECK(read_k(cache, layer, child.slot(7), 0, 1) == 101.0f);
  }
}

TEST_CASE("a freed block is poisoned and a shared one is not", "[kv]") {
  KvCache cache(small_config(KvDType::f16));
  BlockTable a = cache.new_sequence();
  const auto slots = *cache.append(a, 8);
  write_tokens(cache, slots, 1.0f);
  BlockTable b = cache.fork(a);
  cache.release(a);
  CHECK(read_k(cache, 1, b.slot(5), 1, 0) == 6.0f);  // still held by b
  const std::int64_t last = b.slot(7);
  cache.release(b);
  CHECK(std::isnan(read_k(cache, 0, last, 1, 2)));
  CHECK(std::isnan(read_k(cache, 1, slots[0], 0, 0, 1)));
  CHECK(cache.allocator().free_blocks() == 6);
}

TEST_CASE("the cache reports an append it cannot hold without changing anything", "[kv]") {
  KvCache cache(small_config());
  BlockTable a = cache.new_sequence();
  CHECK(cache.append(a, 24).has_value());
  CHECK_FALSE(cache.append(a, 1).has_value());
  const BlockTable* live[] = {&a};
  const auto r = cache.report(live);
  CHECK(r.free_blocks == 0);
  CHECK(r.referenced_tokens == 24);
  CHECK(r.unused_slots == 0);
}

TEST_CASE("reshape_and_cache stores every F32 value as f32_to_f16 rounds it", "[kv]") {
  // Rows of 40 (2 heads of 20): two whole vectors of 16 and a tail of 8 on
  // AVX-512 builds. Ties to even, the largest finite half and the rounding
  // to infinity past it, subnormals, signed zeros, infinities and NaNs with
  // payloads (the bits f32_to_f16 gives: quiet, payload 0x200, the sign).
  KvPoolConfig c = small_config(KvDType::f16);
  c.head_dim = 20;
  KvCache cache(c);
  BlockTable a = cache.new_sequence();
  const auto slots = *cache.append(a, 3);
  auto bits = [](std::uint32_t b) { return std::bit_cast<float>(b); };
  const float edge[] = {0.1f, -0.2f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f, 65519.0f,
                        65520.0f, -65520.0f, 1e-5f, -3e-8f, 2.9e-8f, 6e-8f, 0.0f, -0.0f,
                        INFINITY, -INFINITY, bits(0x7fc00001u), bits(0xffbfffffu), bits(0x7f800001u),
                        std::nextafter(1.0f, 2.0f), 3.14159f, -1e9f, 5.96046e-8f, 6.10352e-5f};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  std::vector<float> k(3 * 40), v(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) {
    k[i] = i < std::size(edge) ? edge[i] : u(rng) * (i % 3 == 0 ? 1e-9f : 1.0f);
    v[i] = i + std::size(edge) < k.size() ? edge[(i * 7) % std::size(edge)] : u(rng);
  }
  kernels::ReshapeAndCacheParams p{k.data(), v.data(), KvDType::f32, slots.data(), 3, cache.pool().layer(0)};
  kernels::cpu::reshape_and_cache(p);
  const PagedKvView view = cache.pool().layer(0);
  const auto* stored = static_cast<const std::uint16_t*>(view.data);
  for (std::int32_t t = 0; t < 3; ++t) {
    for (int which = 0; which < 2; ++which) {
      const auto off = view.offset(std::int32_t(slots[t] / view.block_tokens), which,
                                   std::int32_t(slots[t] % view.block_tokens), 0);
      for (std::int32_t i = 0; i < 40; ++i) {
        const float x = (which == 0 ? k : v)[std::size_t(t * 40 + i)];
        INFO("token " << t << (which ? " V" : " K") << " element " << i << " value " << x);
        CHECK(stored[off + i] == f32_to_f16(x));
      }
    }
  }
}

TEST_CASE("reshape_and_cache skips padding slots and rounds to F16", "[kv]") {
  KvCache cache(small_config(KvDType::f16));
  BlockTable a = cache.new_sequence();
  auto slots = *cache.append(a, 2);
  std::vector<float> k(12, 0.1f), v(12, 0.2f);
  const std::vector<std::int64_t> with_pad = {slots[0], -1};
  kernels::ReshapeAndCacheParams p{k.data(),        v.data(), KvDType::f32,
                                   with_pad.data(), 2,        cache.pool().layer(0)};
  kernels::cpu::reshape_and_cache(p);
  CHECK(read_k(cache, 0, slots[0], 1, 1) == f16_to_f32(f32_to_f16(0.1f)));
  CHECK(read_k(cache, 0, slots[0], 1, 1, 1) == f16_to_f32(f32_to_f16(0.2f)));
}
