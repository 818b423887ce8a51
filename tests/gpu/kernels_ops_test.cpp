// RMSNorm, RoPE, attention and the thread pool against plain references.
#include "gpu/kernels/cpu/attention.hpp"
#include "gpu/kernels/cpu/elementwise.hpp"
#include "gpu/kernels/cpu/rms_norm.hpp"
#include "gpu/kernels/cpu/rope.hpp"
#include "gpu/kernels/cpu/thread_pool.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::kernels::RopeStyle;

namespace {

std::vector<float> random_vec(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

}  // namespace

TEST_CASE("the thread pool runs every item exactly once for any size and grain", "[kernels]") {
  kc::ThreadPool pool(3);
  for (std::size_t n : {1u, 2u, 5u, 16u, 17u, 1000u}) {
    for (std::size_t grain : {1u, 4u, 16u}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](std::size_t b, std::size_t e, std::size_t) {
        for (std::size_t i = b; i < e; ++i) hits[i].fetch_add(1);
      }, grain);
      for (std::size_t i = 0; i < n; ++i) REQUIRE(hits[i].load() == 1);
    }
  }
}

TEST_CASE("rms_norm scales each row by its root mean square and the weight", "[kernels]") {
  kc::ThreadPool pool(2, 0.0);
  const std::int64_t rows = 3, dim = 37;
  auto x = random_vec(std::size_t(rows * dim), 1);
  auto w = random_vec(std::size_t(dim), 2);
  std::vector<float> y(x.size());
  kc::rms_norm({1e-5f}, kc::ConstRowsView(x.data(), rows, dim, dim), w.data(),
               kc::RowsView{y.data(), rows, dim, dim}, pool);
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t i = 0; i < dim; ++i) ss += double(x[std::size_t(r * dim + i)]) * x[std::size_t(r * dim + i)];
    const double scale = 1.0 / std::sqrt(ss / double(dim) + 1e-5);
    for (std::int64_t i = 0; i < dim; ++i) {
      const auto at = std::size_t(r * dim + i);
      REQUIRE(y[at] == Approx(double(w[std::size_t(i)]) * x[at] * scale).epsilon(1e-5));
    }
  }
}

TEST_CASE("rope rotates interleaved and half-split pairs by position times frequency", "[kernels]") {
  for (RopeStyle style : {RopeStyle::interleaved, RopeStyle::half_split}) {
    kc::RopeParams p;
    p.n_heads = 2;
    p.head_dim = 8;
    p.rope_dims = 6;  // the last two dimensions of each head stay put
    p.theta = 10000.0f;
    p.style = style;
    const auto inv = kc::rope_inv_freq(p);
    REQUIRE(inv.size() == 3);
    const auto x0 = random_vec(16 * 2, 4);
    auto x = x0;
    const std::int32_t positions[] = {0, 5};
    kc::rope(p, inv, kc::RowsView{x.data(), 2, 16, 16}, positions);
    // Position 0 is the identity.
    CHECK(std::memcmp(x.data(), x0.data(), 16 * sizeof(float)) == 0);
    for (int h = 0; h < 2; ++h) {
      const float* in = x0.data() + 16 + h * 8;
      const float* out = x.data() + 16 + h * 8;
      for (int i = 0; i < 3; ++i) {
        const int a = style == RopeStyle::interleaved ? 2 * i : i;
        const int b = style == RopeStyle::interleaved ? 2 * i + 1 : i + 3;
        const double angle = 5.0 * std::pow(10000.0, -2.0 * i / 6.0);
        CHECK(out[a] == Approx(in[a] * std::cos(angle) - in[b] * std::sin(angle)).margin(1e-5));
        CHECK(out[b] == Approx(in[a] * std::sin(angle) + in[b] * std::cos(angle)).margin(1e-5));
      }
      CHECK(out[6] == in[6]);
      CHECK(out[7] == in[7]);
    }
  }
}

TEST_CASE("llama3 rope scaling keeps high frequencies and divides low ones by the factor", "[kernels]") {
  kc::RopeParams p;
  p.head_dim = p.rope_dims = 128;
  p.theta = 500000.0f;
  const auto plain = kc::rope_inv_freq(p);
  p.scaling.type = pensieve::kernels::RopeScalingType::llama3;
  p.scaling.factor = 8.0f;
  p.scaling.original_context = 8192;
  const auto scaled = kc::rope_inv_freq(p);
  CHECK(scaled[0] == plain[0]);                         // wavelength 2*pi: kept
  CHECK(scaled[63] == Approx(plain[63] / 8.0f));        // longest wavelength: divided
  p.scaling.type = pensieve::kernels::RopeScalingType::linear;
  CHECK(kc::rope_inv_freq(p)[0] == Approx(plain[0] / 8.0f));
}

namespace {

// Softmax attention in double for one query head over positions [0, n_kv).
std::vector<double> reference_attention(const float* q, const float* k, const float* v, int n_kv,
                                        int kv_stride, int head_dim, float scale) {
  std::vector<double> s(static_cast<std::size_t>(n_kv)), out(static_cast<std::size_t>(head_dim), 0.0);
  double m = -1e300, sum = 0;
  for (int j = 0; j < n_kv; ++j) {
    double d = 0;
    for (int i = 0; i < head_dim; ++i) d += double(q[i]) * k[j * kv_stride + i];
    s[std::size_t(j)] = d * scale;
    m = std::max(m, s[std::size_t(j)]);
  }
  for (int j = 0; j < n_kv; ++j) sum += std::exp(s[std::size_t(j)] - m);
  for (int j = 0; j < n_kv; ++j) {
    const double p = std::exp(s[std::size_t(j)] - m) / sum;
    for (int i = 0; i < head_dim; ++i) out[std::size_t(i)] += p * v[j * kv_stride + i];
  }
  return out;
}

struct AttentionCase {
  kc::AttentionParams p{4, 2, 16, 0.25f, 8};
  int n_kv = 45;
  std::vector<float> k = random_vec(std::size_t(45 * 2 * 16), 8);
  std::vector<float> v = random_vec(std::size_t(45 * 2 * 16), 9);
  std::vector<float> q = random_vec(std::size_t(45 * 4 * 16), 10);

  // Queries [first, first + count) as one sequence's span.
  kc::AttentionSequence span(int first, int count, std::vector<float>& out) {
    kc::AttentionSequence s;
    s.q = q.data() + first * 64;
    s.q_stride = 64;
    s.n_queries = count;
    s.start_pos = first;
    s.k = k.data();
    s.v = v.data();
    s.out = out.data() + first * 64;
    s.out_stride = 64;
    return s;
  }
};

}  // namespace

TEST_CASE("attention matches softmax over each query's causal prefix with grouped KV heads",
          "[kernels]") {
  AttentionCase c;
  std::vector<float> out(c.q.size());
  kc::ThreadPool pool(2, 0.0);
  const kc::AttentionSequence all = c.span(0, c.n_kv, out);
  kc::attention(c.p, {&all, 1}, pool);
  for (int i = 0; i < c.n_kv; ++i) {
    for (int h = 0; h < 4; ++h) {
      const auto ref = reference_attention(c.q.data() + i * 64 + h * 16, c.k.data() + (h / 2) * 16,
                                           c.v.data() + (h / 2) * 16, i + 1, 32, 16, 0.25f);
      for (int d = 0; d < 16; ++d) REQUIRE(out[std::size_t(i * 64 + h * 16 + d)] == Approx(ref[std::size_t(d)]).margin(1e-5));
    }
  }
}

TEST_CASE("attention output has the same bits whether queries come at once, in chunks or batched",
          "[kernels]") {
  AttentionCase c;
  std::vector<float> at_once(c.q.size()), chunked(c.q.size());
  kc::ThreadPool pool1(1), pool3(3, 0.0);  // cost 0: every loop uses the workers
  const kc::AttentionSequence all = c.span(0, c.n_kv, at_once);
  kc::attention(c.p, {&all, 1}, pool1);
  // The same queries as three spans of one batch (as three sequences sharing the KV).
  const kc::AttentionSequence parts[] = {c.span(0, 7, chunked), c.span(7, 1, chunked),
                                         c.span(8, 37, chunked)};
  kc::attention(c.p, parts, pool3);
  CHECK(std::memcmp(at_once.data(), chunked.data(), at_once.size() * sizeof(float)) == 0);
}

TEST_CASE("silu_mul is g * sigmoid(g) * u within a few ulp, with no overflow at large |g|",
          "[kernels]") {
  // 37 columns: two 16-wide vector blocks and a scalar tail per row.
  const std::int64_t rows = 3, cols = 37;
  std::vector<float> gate(std::size_t(rows * cols)), up(gate.size());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f), narrow(-6.0f, 6.0f);
  for (std::size_t i = 0; i < gate.size(); ++i) {
    gate[i] = i % 3 == 0 ? wide(rng) : narrow(rng);
    up[i] = narrow(rng);
  }
  gate[5] = 0.0f;
  gate[6] = -0.0f;
  gate[40] = 89.0f;    // exp(89) overflows a float
  gate[41] = -104.0f;  // sigmoid underflows
  const std::vector<float> g0 = gate;
  kc::ThreadPool pool(2, 0);
  kc::silu_mul({gate.data(), rows, cols, cols}, {up.data(), rows, cols, cols}, pool);
  for (std::size_t i = 0; i < gate.size(); ++i) {
    const double g = g0[i], want = g / (1.0 + std::exp(-g)) * double(up[i]);
    INFO("element " << i << ", g = " << g);
    REQUIRE(std::isfinite(gate[i]));
    // Below g = -87 the sigmoid stays at exp(-87) ~ 1.6e-38 (exp_approx.hpp's
    // floor), so results there are ~1e-36 instead of denormal or zero.
    CHECK(std::abs(double(gate[i]) - want) <= 4e-7 * std::abs(want) + 1e-35);
  }
  // The vector body and the scalar tail compute the same function.
  std::vector<float> shifted_gate(static_cast<std::size_t>(cols)), shifted_up(shifted_gate.size());
  for (std::int64_t j = 0; j < cols; ++j) {
    shifted_gate[std::size_t(j)] = g0[std::size_t((j + 32) % cols)];
    shifted_up[std::size_t(j)] = up[std::size_t((j + 32) % cols)];
  }
  kc::silu_mul({shifted_gate.data(), 1, cols, cols}, {shifted_up.data(), 1, cols, cols}, pool);
  for (std::int64_t j = 0; j < cols; ++j) {
    INFO("column " << j);
    CHECK(shifted_gate[std::size_t(j)] == gate[std::size_t((j + 32) % cols)]);
  }
}
