// The llama.cpp-numerics path for quantised weights: the activation
// quantisers (ggml's Q8_0, Q8_1, Q8_K blocks), each type's scalar dot
// against the dequantised values, every vectorised kernel against its scalar
// reference bit for bit over odd sizes, and quant_matmul's batch and thread
// invariance.
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/kernels/cpu/quant_matmul.hpp"
#include "tests/gpu/quant_test_blocks.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;
using pensieve::testing::quantised_dtypes;
using pensieve::testing::random_blocks;
using pensieve::testing::random_floats;

namespace {

bool same_bits(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

struct Acts {
  std::vector<float> storage;
  kc::QuantActs acts;
};

Acts quantise(kc::ActQuant a, const std::vector<float>& x, std::int64_t rows) {
  Acts out;
  const auto cols = std::int64_t(x.size()) / rows;
  out.acts = kc::quantize_act_rows(a, kc::ConstRowsView(x.data(), rows, cols, cols), out.storage);
  return out;
}

}  // namespace

TEST_CASE("Q8_K activations: d = 1 / (-127 / max) with max the signed element of largest magnitude",
          "[kernels][quant]") {
  std::vector<float> x(512, 0.0f);
  x[3] = -2.0f;  // block 0's max: negative, so iscale = 63.5 and the signs flip
  x[4] = 2.0f;   // same magnitude, later: not the max
  x[5] = 1.0f / 127.0f;
  x[20] = 0.5f;
  // block 1 stays zero: d = 0 and every quant and sum 0
  const Acts a = quantise(kc::ActQuant::q8_k, x, 1);
  const kc::QuantActRow r = a.acts.row(0);
  CHECK(r.d[0] == 1.0f / (-127.0f / -2.0f));
  CHECK(r.d[1] == 0.0f);
  CHECK(r.q[3] == -127);
  CHECK(r.q[4] == 127);
  CHECK(r.q[5] == 0);    // 0.5 rounds to even
  CHECK(r.q[20] == 32);  // 31.75
  CHECK(r.bsums[0] == -127 + 127 + 0);
  CHECK(r.bsums[1] == 32);
  for (int j = 2; j < 32; ++j) CHECK(r.bsums[j] == 0);
}

TEST_CASE("the activation quantisers this CPU runs give the portable ones' bytes",
          "[kernels][quant]") {
  for (const kc::ActQuant a : {kc::ActQuant::q8_0, kc::ActQuant::q8_1, kc::ActQuant::q8_k}) {
    for (const std::int64_t n : {256, 768, 2048}) {
      auto x = random_floats(n, 940 + unsigned(n));
      x[7] = 3.5f;  // ties of magnitude, the later of opposite sign
      x[9] = -3.5f;
      for (std::int64_t i = 256; i < 512 && i < n; ++i) x[std::size_t(i)] = 0.0f;  // a zero block
      const std::int64_t nb = n / kc::act_block_values(a);
      const auto values = static_cast<std::size_t>(n), blocks = static_cast<std::size_t>(nb);
      std::vector<std::int8_t> q(values), q_ref(values);
      std::vector<float> d(blocks), d_ref(blocks), s(blocks), s_ref(blocks);
      std::vector<std::int16_t> bs(values / 16), bs_ref(values / 16);
      kc::quantize_act_row(a, x.data(), n, q.data(), d.data(), s.data(), bs.data());
      kc::quantize_act_row_portable(a, x.data(), n, q_ref.data(), d_ref.data(), s_ref.data(),
                                    bs_ref.data());
      INFO("kind " << int(a) << " n " << n);
      CHECK(q == q_ref);
      CHECK(same_bits(d.data(), d_ref.data(), d.size()));
      if (a == kc::ActQuant::q8_1) CHECK(same_bits(s.data(), s_ref.data(), s.size()));
      if (a == kc::ActQuant::q8_k) CHECK(bs == bs_ref);
    }
  }
}

TEST_CASE("Q8_0 activations keep ggml's F16 scale, Q8_1 adds F16(d * sum q)", "[kernels][quant]") {
  auto x = random_floats(64, 5);
  const Acts a0 = quantise(kc::ActQuant::q8_0, x, 1), a1 = quantise(kc::ActQuant::q8_1, x, 1);
  for (int b = 0; b < 2; ++b) {
    float amax = 0;
    int sum = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[std::size_t(32 * b + i)]));
    for (int i = 0; i < 32; ++i) {
      const float want = std::nearbyint(x[std::size_t(32 * b + i)] * (127.0f / amax));
      CHECK(a0.acts.q[32 * b + i] == std::int8_t(want));
      sum += a0.acts.q[32 * b + i];
    }
    CHECK(a0.acts.d[b] == pensieve::f16_to_f32(pensieve::f32_to_f16(amax / 127.0f)));
    CHECK(a1.acts.d[b] == a0.acts.d[b]);
    CHECK(a1.acts.s[b] == pensieve::f16_to_f32(pensieve::f32_to_f16(amax / 127.0f * float(sum))));
  }
}

TEST_CASE(
    "every type's scalar dot equals the dequantised weights times the dequantised activations",
    "[kernels][quant]") {
  for (DType t : quantised_dtypes) {
    INFO(pensieve::model::dtype_name(t));
    const std::int64_t nb = 3, n = nb * pensieve::model::dtype_block_elems(t);
    const auto w = random_blocks(t, nb, 7 + unsigned(t));
    const auto x = random_floats(n, 9);
    const kc::ActQuant aq = kc::act_quant_for(t);
    const Acts a = quantise(aq, x, 1);
    std::vector<float> wf(static_cast<std::size_t>(n));
    kc::dequantize_row(t, w.data(), n, wf.data());
    const kc::QuantActRow r = a.acts.row(0);
    const std::int64_t ab = kc::act_block_values(aq);
    double exact = 0, mag = 0, s_error = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      const double xv = double(r.q[k]) * double(r.d[k / ab]);
      exact += double(wf[std::size_t(k)]) * xv;
      mag += std::fabs(double(wf[std::size_t(k)]) * xv);
    }
    if (aq == kc::ActQuant::q8_1) {
      // Q8_1's F16 s = d * sum q stands for the exact sum: the min term moves
      // by |m| * |s - d sum q| per block (at most 2^-11 relative).
      for (std::int64_t b = 0; b < nb; ++b) {
        double exact_s = 0;
        for (int i = 0; i < 32; ++i) exact_s += double(r.q[b * 32 + i]) * double(r.d[b]);
        s_error += 0.011 * std::fabs(double(r.s[b]) - exact_s);  // |m| <= 0.011 in random_blocks
      }
    }
    const float got = kc::quant_dot_fn(t, kc::QuantDotPath::portable)(w.data(), r, nb);
    CHECK(std::fabs(double(got) - exact) <= 1e-5 * mag + s_error + 1e-6);
  }
}

namespace {

constexpr kc::QuantDotPath vector_paths[] = {kc::QuantDotPath::avx2, kc::QuantDotPath::avx512};

// Whether this CPU runs `path`; WARN (a skip, which is no pass) where not.
bool path_runs(kc::QuantDotPath path) {
  if (kc::quant_dot_path_supported(path)) return true;
  WARN("SKIPPED: this CPU has no " << kc::quant_dot_path_name(path)
                                   << ": its quant dot kernels are not checked here");
  return false;
}

// Every F16 scale field of the blocks set to one of the extremes in turn:
// the largest finite, the smallest normal and subnormal, zeros of both
// signs and an ordinary value, each with either sign.
void extreme_scales(DType t, std::vector<std::byte>& w) {
  constexpr std::uint16_t extremes[] = {0x7bff, 0xfbff, 0x0400, 0x8400, 0x0001,
                                        0x8001, 0x0000, 0x8000, 0x3c00, 0x2e66};
  const std::size_t bb = pensieve::model::dtype_block_bytes(t);
  std::size_t k = 0;
  for (std::size_t b = 0; b < w.size() / bb; ++b)
    for (std::size_t off : pensieve::testing::f16_fields(t)) {
      const std::uint16_t h = extremes[k++ % std::size(extremes)];
      std::memcpy(w.data() + b * bb + off, &h, 2);
    }
}

// Activations whose blocks range from all-zero and tiny (an F16 scale that
// underflows) to large (an F16 scale in the thousands), with outsized
// values in some.
std::vector<float> extreme_activations(std::int64_t n, std::uint32_t seed) {
  auto x = random_floats(n, seed);
  constexpr float block_scale[] = {1.0f, 0.0f, 1e-7f, 3e3f, 1e-3f, 1.0f, 100.0f};
  for (std::int64_t i = 0; i < n; ++i) x[std::size_t(i)] *= block_scale[(i / 32) % 7];
  for (std::size_t i = 5; i < x.size(); i += 97) x[i] *= 30.0f;
  return x;
}

}  // namespace

TEST_CASE("the best quant dot path is the widest this CPU runs", "[kernels][quant]") {
  const kc::QuantDotPath want = kc::quant_dot_path_supported(kc::QuantDotPath::avx512)
                                    ? kc::QuantDotPath::avx512
                                : kc::quant_dot_path_supported(kc::QuantDotPath::avx2)
                                    ? kc::QuantDotPath::avx2
                                    : kc::QuantDotPath::portable;
  CHECK(std::string(kc::quant_dot_isa()) == kc::quant_dot_path_name(want));
  for (DType t : quantised_dtypes) {
    INFO(pensieve::model::dtype_name(t));
    CHECK(kc::quant_dot_best_path(t) == want);
    CHECK(kc::quant_dot_fn(t, kc::QuantDotPath::best) == kc::quant_dot_fn(t, want));
    CHECK(kc::quant_dot_vectorised(t) == (want != kc::QuantDotPath::portable));
  }
  for (kc::QuantDotPath p : vector_paths)
    if (!kc::quant_dot_path_supported(p)) CHECK(kc::quant_dot_fn(DType::q4_k, p) == nullptr);
}

TEST_CASE("every vectorised quant dot gives its scalar reference's bits over odd sizes",
          "[kernels][quant][quant_dot]") {
  for (kc::QuantDotPath path : vector_paths) {
    if (!path_runs(path)) continue;
    for (DType t : quantised_dtypes) {
      INFO(pensieve::model::dtype_name(t) << " on " << kc::quant_dot_path_name(path));
      const kc::QuantDotFn fn = kc::quant_dot_fn(t, path);
      const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
      REQUIRE(fn != nullptr);
      for (std::int64_t nb : {1, 2, 3, 5, 7, 11, 13, 17}) {
        const std::int64_t n = nb * pensieve::model::dtype_block_elems(t);
        const auto w = random_blocks(t, nb, 100 + unsigned(nb) + 13 * unsigned(t));
        auto x = random_floats(n, 200 + unsigned(nb));
        for (std::size_t i = 0; i < x.size(); i += 37) x[i] *= 50.0f;  // uneven block magnitudes
        const Acts a = quantise(kc::act_quant_for(t), x, 1);
        const float want = ref(w.data(), a.acts.row(0), nb), got = fn(w.data(), a.acts.row(0), nb);
        INFO(nb << " blocks: " << got << " vs " << want);
        CHECK(same_bits(&got, &want, 1));
      }
    }
  }
}

TEST_CASE("every vectorised quant dot gives its scalar reference's bits at extreme scales",
          "[kernels][quant][quant_dot]") {
  for (kc::QuantDotPath path : vector_paths) {
    if (!path_runs(path)) continue;
    for (DType t : quantised_dtypes) {
      INFO(pensieve::model::dtype_name(t) << " on " << kc::quant_dot_path_name(path));
      const kc::QuantDotFn fn = kc::quant_dot_fn(t, path);
      const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
      for (std::int64_t nb : {1, 3, 7, 13, 20}) {
        const std::int64_t n = nb * pensieve::model::dtype_block_elems(t);
        for (unsigned seed = 0; seed < 4; ++seed) {
          auto w = random_blocks(t, nb, 500 + seed + 17 * unsigned(t));
          extreme_scales(t, w);
          // Rows of one block each as well: every extreme meets block 0.
          const auto x = extreme_activations(n, 600 + seed + unsigned(nb));
          const Acts a = quantise(kc::act_quant_for(t), x, 1);
          const float want = ref(w.data(), a.acts.row(0), nb),
                      got = fn(w.data(), a.acts.row(0), nb);
          INFO(nb << " blocks, seed " << seed << ": " << got << " vs " << want);
          CHECK(same_bits(&got, &want, 1));
        }
      }
    }
  }
}

TEST_CASE("the vectorised Q8_0 dots handle -128 weights exactly", "[kernels][quant][quant_dot]") {
  auto w = random_blocks(DType::q8_0, 3, 77);
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 32; i += 3) w[std::size_t(b * 34 + 2 + i)] = std::byte(0x80);
  const auto x = random_floats(96, 78);
  const Acts a = quantise(kc::ActQuant::q8_0, x, 1);
  for (kc::QuantDotPath path : vector_paths) {
    if (!path_runs(path)) continue;
    INFO(kc::quant_dot_path_name(path));
    for (std::int64_t nb : {1, 2, 3}) {
      const float want =
          kc::quant_dot_fn(DType::q8_0, kc::QuantDotPath::portable)(w.data(), a.acts.row(0), nb);
      const float got = kc::quant_dot_fn(DType::q8_0, path)(w.data(), a.acts.row(0), nb);
      CHECK(same_bits(&got, &want, 1));
    }
  }
}

TEST_CASE("quant_matmul on each path gives the reference dot's bits", "[kernels][quant][quant_dot]") {
  for (kc::QuantDotPath path : vector_paths) {
    if (!path_runs(path)) continue;
    for (DType t : quantised_dtypes) {
      INFO(pensieve::model::dtype_name(t) << " on " << kc::quant_dot_path_name(path));
      const std::int64_t rows = 19, cols = 5 * 256, tokens = 3;
      const std::int64_t nb = cols / pensieve::model::dtype_block_elems(t);
      const auto w = random_blocks(t, rows * nb, 700 + unsigned(t));
      const kc::WeightView wv{t, w.data(), rows, cols, pensieve::model::dtype_row_bytes(t, cols)};
      const auto x = random_floats(tokens * cols, 701);
      const Acts a = quantise(kc::act_quant_for(t), x, tokens);
      kc::ThreadPool pool(2, 0.0);
      std::vector<float> y(std::size_t(tokens * rows)), scratch;
      kc::quant_matmul(kc::ConstRowsView(x.data(), tokens, cols, cols), wv,
                       kc::RowsView{y.data(), tokens, rows, rows}, pool, scratch, path);
      const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
      bool all_equal = true;
      for (std::int64_t tk = 0; tk < tokens; ++tk)
        for (std::int64_t o = 0; o < rows; ++o) {
          const float want = ref(wv.row(o), a.acts.row(tk), nb);
          all_equal = all_equal && same_bits(&want, &y[std::size_t(tk * rows + o)], 1);
        }
      CHECK(all_equal);
    }
  }
}

TEST_CASE(
    "a quant matmul row has its reference dot's bits alone, in batches and with any thread count",
    "[kernels][quant]") {
  for (DType t : quantised_dtypes) {
    INFO(pensieve::model::dtype_name(t));
    const std::int64_t rows = 37, cols = 3 * 256, tokens = 11;
    const std::int64_t nb = cols / pensieve::model::dtype_block_elems(t);
    const auto w = random_blocks(t, rows * nb, 300 + unsigned(t));
    const kc::WeightView wv{t, w.data(), rows, cols, pensieve::model::dtype_row_bytes(t, cols)};
    const auto x = random_floats(tokens * cols, 301);
    const Acts a = quantise(kc::act_quant_for(t), x, tokens);
    auto run = [&](const float* xs, std::int64_t n, std::size_t threads) {
      kc::ThreadPool pool(threads, 0.0);
      std::vector<float> y(std::size_t(n * rows)), scratch;
      kc::matmul({}, kc::ConstRowsView(xs, n, cols, cols), wv,
                 kc::RowsView{y.data(), n, rows, rows}, pool, scratch);
      return y;
    };
    const auto batch = run(x.data(), tokens, 2);
    const kc::QuantDotFn ref = kc::quant_dot_fn(t, kc::QuantDotPath::portable);
    bool all_equal = true;
    for (std::int64_t tk = 0; tk < tokens; ++tk)
      for (std::int64_t o = 0; o < rows; ++o) {
        const float want = ref(wv.row(o), a.acts.row(tk), nb);
        all_equal = all_equal && same_bits(&want, &batch[std::size_t(tk * rows + o)], 1);
      }
    CHECK(all_equal);
    for (std::int64_t tk : {0, 5, 10}) {
      const auto alone = run(x.data() + tk * cols, 1, 1);
      CHECK(same_bits(alone.data(), batch.data() + tk * rows, std::size_t(rows)));
    }
  }
}

TEST_CASE(
    "on float activations every quantised matmul equals the F32 matmul on its dequantised copy",
    "[kernels][quant]") {
  for (DType t : quantised_dtypes) {
    INFO(pensieve::model::dtype_name(t));
    const std::int64_t rows = 70, cols = 2 * 256,
                       tokens = 13;  // decode and blocked paths, odd tail rows
    const std::int64_t nb = cols / pensieve::model::dtype_block_elems(t);
    const auto w = random_blocks(t, rows * nb, 400 + unsigned(t));
    const kc::WeightView wv{t, w.data(), rows, cols, pensieve::model::dtype_row_bytes(t, cols)};
    std::vector<float> deq(std::size_t(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
      kc::dequantize_row(t, wv.row(r), cols, deq.data() + r * cols);
    const kc::WeightView fv{DType::f32, reinterpret_cast<const std::byte*>(deq.data()), rows, cols,
                            std::size_t(cols) * 4};
    const auto x = random_floats(tokens * cols, 401);
    kc::MatmulParams p;
    p.float_activations = true;
    kc::ThreadPool pool(2, 0.0);
    for (std::int64_t n : {std::int64_t(1), std::int64_t(3), tokens}) {
      std::vector<float> yq(std::size_t(n * rows)), yf(yq.size());
      kc::matmul(p, kc::ConstRowsView(x.data(), n, cols, cols), wv,
                 kc::RowsView{yq.data(), n, rows, rows}, pool);
      kc::matmul(p, kc::ConstRowsView(x.data(), n, cols, cols), fv,
                 kc::RowsView{yf.data(), n, rows, rows}, pool);
      CHECK(same_bits(yq.data(), yf.data(), yq.size()));
    }
  }
}

TEST_CASE("matmul_many over a mix of quantised types gives each weight's reference dot bits",
          "[kernels][quant][quant_dot]") {
  // Q4_K + Q6_K share Q8_K activations; Q5_0 and IQ4_NL need Q8_0 ones.
  const DType types[] = {DType::q4_k, DType::q6_k, DType::q5_0, DType::iq4_nl};
  const std::int64_t rows[] = {37, 16, 5, 21}, cols = 3 * 256;
  std::vector<std::vector<std::byte>> bytes;
  std::vector<kc::WeightView> w;
  for (std::size_t i = 0; i < 4; ++i) {
    const std::int64_t nb = cols / pensieve::model::dtype_block_elems(types[i]);
    bytes.push_back(random_blocks(types[i], rows[i] * nb, 800 + unsigned(i)));
    w.push_back({types[i], bytes.back().data(), rows[i], cols,
                 pensieve::model::dtype_row_bytes(types[i], cols)});
  }
  for (std::int64_t n : {1, 3}) {
    const auto x = random_floats(n * cols, 801);
    for (std::size_t threads : {1, 2, 3}) {
      kc::ThreadPool pool(threads, 0.0);
      std::vector<std::vector<float>> got(4);
      std::vector<kc::RowsView> y;
      for (std::size_t i = 0; i < 4; ++i) {
        got[i].assign(std::size_t(n * rows[i]), -1.0f);
        y.push_back({got[i].data(), n, rows[i], rows[i]});
      }
      std::vector<float> scratch;
      kc::matmul_many({}, kc::ConstRowsView(x.data(), n, cols, cols), w, y, pool, scratch);
      for (std::size_t i = 0; i < 4; ++i) {
        INFO(pensieve::model::dtype_name(types[i]) << ", tokens " << n << ", threads " << threads);
        const Acts a = quantise(kc::act_quant_for(types[i]), x, n);
        const kc::QuantDotFn ref = kc::quant_dot_fn(types[i], kc::QuantDotPath::portable);
        const std::int64_t nb = cols / pensieve::model::dtype_block_elems(types[i]);
        bool all_equal = true;
        for (std::int64_t t = 0; t < n; ++t)
          for (std::int64_t o = 0; o < rows[i]; ++o) {
            const float want = ref(w[i].row(o), a.acts.row(t), nb);
            all_equal = all_equal && same_bits(&want, &got[i][std::size_t(t * rows[i] + o)], 1);
          }
        CHECK(all_equal);
      }
    }
  }
}
