// The grouped softmax-state tile (several query heads over one KV head's
// keys) against the one-query tile every other path is checked against.
#include "gpu/kernels/cpu/attention_math.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace pensieve::kernels::cpu;

TEST_CASE("a group of query heads gets the bits of one tile call per head", "[attention]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int cases = 0;
  // 32, 64 and 128 take the grouped path (up to 4 heads a pass, 2 at 128);
  // 40 falls back to one call per head.
  for (std::int32_t head_dim : {32, 40, 64, 128}) {
    for (std::int32_t heads : {1, 2, 3, 4, 5, 7}) {
      for (std::int32_t n_keys : {1, 5, 16, 17, 100, 128}) {
        std::vector<float> keys(std::size_t(n_keys * head_dim)), values(keys.size()),
            queries(std::size_t(heads * head_dim));
        for (auto* v : {&keys, &values, &queries})
          for (float& x : *v) x = normal(rng);
        const auto n = static_cast<std::size_t>(n_keys);
        std::vector<const float*> k(n), v(n), q(static_cast<std::size_t>(heads));
        for (std::int32_t j = 0; j < n_keys; ++j) {
          k[std::size_t(j)] = keys.data() + j * head_dim;
          v[std::size_t(j)] = values.data() + j * head_dim;
        }
        for (std::int32_t h = 0; h < heads; ++h) q[std::size_t(h)] = queries.data() + h * head_dim;

        const auto state = std::size_t(attention_state_floats(head_dim));
        std::vector<float> scores(std::size_t(heads * n_keys)), one(state * std::size_t(heads)),
            grouped(one.size());
        std::vector<float*> targets(static_cast<std::size_t>(heads));
        for (std::int32_t h = 0; h < heads; ++h) {
          attention_tile_state(q[std::size_t(h)], k.data(), v.data(), n_keys, head_dim, 0.125f,
                               scores.data(), one.data() + std::size_t(h) * state);
          targets[std::size_t(h)] = grouped.data() + std::size_t(h) * state;
        }
        attention_tile_states(q.data(), heads, k.data(), v.data(), n_keys, head_dim, 0.125f,
                              scores.data(), targets.data());
        INFO("head_dim " << head_dim << ", heads " << heads << ", keys " << n_keys);
        CHECK(std::memcmp(one.data(), grouped.data(), one.size() * sizeof(float)) == 0);
        ++cases;
      }
    }
  }
  CHECK(cases == 4 * 6 * 6);
}
