// The CUDA decoder ops against their CPU twins (gpu/kernels/cpu) on random
// inputs, per output dtype: F32 within F32 rounding, F16/BF16 within one
// rounding of the output. [gpu] cases run from tests/gpu/device-checks.sh and
// exit as SKIPPED (77) without a device; the untagged cases test the host-side
// pieces (batch packing, split plans, KV budget) everywhere CUDA is compiled.
#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/backend/cuda/cublas_gemm.hpp"
#include "gpu/backend/cuda/cuda_batch.hpp"
#include "gpu/backend/cuda/cuda_kv_pool.hpp"
#include "gpu/kernels/cpu/attention_widen_q8.hpp"
#include "gpu/kernels/cpu/elementwise.hpp"
#include "gpu/kernels/cpu/embedding.hpp"
#include "gpu/kernels/cpu/reshape_and_cache.hpp"
#include "gpu/kernels/cpu/rms_norm.hpp"
#include "gpu/kernels/cpu/rope.hpp"
#include "gpu/kernels/cuda/ops_launch.hpp"
#include "gpu/kv/fp8_kv_row.hpp"
#include "tests/gpu/cuda_test_support.hpp"

#include <cstring>
#include <random>

using namespace pensieve;
namespace kc = pensieve::kernels::cpu;
namespace kcu = pensieve::kernels::cuda;
using testing::cuda_require;
using testing::DeviceCopy;
using testing::max_rel_error;

namespace {

std::vector<float> random_floats(std::size_t n, std::mt19937_64& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = u(rng); while (x == 0.0f);
  }
  return v;
}

// Reads back `n` elements of a device array of dtype t as F32.
std::vector<float> read_as_f32(const DeviceCopy& d, kv::KvDType t, std::size_t n) {
  if (t == kv::KvDType::f32) return d.read<float>(n);
  return testing::from_half_words(d.read<std::uint16_t>(n), t == kv::KvDType::bf16);
}

double rounding_tolerance(kv::KvDType t) {
  // One rounding of the output (2^-8 BF16, 2^-11 F16) on top of F32 noise.
  return t == kv::KvDType::f32 ? 2e-5 : t == kv::KvDType::f16 ? 1.5e-3 : 8e-3;
}

constexpr kv::KvDType kAllDtypes[] = {kv::KvDType::f32, kv::KvDType::f16, kv::KvDType::bf16};

// 29 fused rows [Q's 8 heads | K's 2 heads | V's 2 heads] of random values,
// their positions and cache slots (row 4 skipped: slot -1), and the rows
// after the CPU RoPE of Q and K: the fused kernel's input and its reference.
struct FusedRows {
  static constexpr std::int32_t rows = 29, n_heads = 8, n_kv_heads = 2;
  std::int32_t head_dim = 0, q_dim = 0, kv_dim = 0, stride = 0;
  kernels::RopeStyle style{};
  std::vector<float> inv, qkv, roped;
  std::vector<std::int32_t> pos;
  std::vector<std::int64_t> slots;

  // Row r's Q after RoPE, rows one after another.
  std::vector<float> roped_q() const {
    std::vector<float> q(std::size_t(rows * q_dim));
    for (std::int32_t r = 0; r < rows; ++r)
      std::memcpy(&q[std::size_t(r * q_dim)], &roped[std::size_t(r * stride)], std::size_t(q_dim) * 4);
    return q;
  }
};

FusedRows fused_rows(std::mt19937_64& rng, std::int32_t head_dim, kernels::RopeStyle style) {
  FusedRows f;
  f.head_dim = head_dim;
  f.q_dim = f.n_heads * head_dim;
  f.kv_dim = f.n_kv_heads * head_dim;
  f.stride = f.q_dim + 2 * f.kv_dim;
  f.style = style;
  kc::RopeParams rp;
  rp.n_heads = f.n_heads + f.n_kv_heads;  // Q's heads then K's in each fused row
  rp.head_dim = head_dim;
  rp.rope_dims = head_dim;
  rp.style = style;
  f.inv = kc::rope_inv_freq(rp);
  f.qkv = random_floats(std::size_t(f.rows * f.stride), rng, 2.0f);
  f.pos.resize(f.rows);
  for (auto& p : f.pos) p = std::int32_t(rng() % 4096);
  f.slots.resize(f.rows);
  for (std::int32_t i = 0; i < f.rows; ++i) f.slots[std::size_t(i)] = (i * 11) % 64;
  f.slots[4] = -1;
  f.roped = f.qkv;
  kc::rope(rp, f.inv, {f.roped.data(), f.rows, f.q_dim + f.kv_dim, f.stride}, f.pos);
  return f;
}

// The fused rows on the device, and the launch that ropes them into `q_out`
// (as q_dtype) and writes K/V into `cache` (a view of device memory).
struct FusedLaunch {
  DeviceCopy qkv, inv, pos, slots;
  explicit FusedLaunch(const FusedRows& f) : qkv(f.qkv), inv(f.inv), pos(f.pos), slots(f.slots) {}

  kcu::QkvRopeCacheLaunch params(const FusedRows& f, const DeviceCopy& q_out, kv::KvDType q_dtype,
                                 const kv::PagedKvView& cache) const {
    kcu::QkvRopeCacheLaunch p;
    p.qkv = qkv.as<float>();
    p.row_stride = f.stride;
    p.rows = f.rows;
    p.n_heads = f.n_heads;
    p.n_kv_heads = f.n_kv_heads;
    p.head_dim = f.head_dim;
    p.rope_dims = f.head_dim;
    p.interleaved = f.style == kernels::RopeStyle::interleaved;
    p.inv_freq = inv.as<float>();
    p.positions = pos.as<std::int32_t>();
    p.slots = slots.as<std::int64_t>();
    p.q_out = q_out.as<void>();
    p.q_stride = f.q_dim;
    p.q_dtype = q_dtype;
    p.cache = cache;
    return p;
  }
};

}  // namespace

TEST_CASE("CUDA embedding gathers the same rows as the CPU lookup, exactly", "[gpu][cuda_ops]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(11);
  const std::int32_t vocab = 1000, dim = 200, n = 77;
  for (bool bf16 : {false, true}) {
    const auto table = testing::to_half_words(random_floats(std::size_t(vocab * dim), rng), bf16);
    std::vector<std::int32_t> tokens(n);
    for (auto& t : tokens) t = std::int32_t(rng() % vocab);
    kc::WeightView view{bf16 ? model::DType::bf16 : model::DType::f16,
                        reinterpret_cast<const std::byte*>(table.data()), vocab, dim,
                        std::size_t(dim) * 2};
    std::vector<float> want(std::size_t(n * dim));
    kc::embedding_lookup(view, tokens, {want.data(), n, dim, dim});
    DeviceCopy d_table(table), d_tokens(tokens), d_out(want.size() * 4);
    cuda_require(kcu::launch_embedding(d_table.as<void>(), bf16 ? kv::KvDType::bf16 : kv::KvDType::f16,
                                       dim, d_tokens.as<std::int32_t>(), n, d_out.as<float>(), nullptr));
    CHECK(d_out.read<float>(want.size()) == want);
  }
}

TEST_CASE("CUDA RMSNorm matches the CPU op for every output dtype, gathered rows too",
          "[gpu][cuda_ops]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(12);
  kc::ThreadPool pool(1);
  for (std::int32_t dim : {64, 2048, 5000}) {
    const std::int32_t rows = 33;
    const auto x = random_floats(std::size_t(rows * dim), rng, 3.0f);
    const auto w = random_floats(std::size_t(dim), rng);
    std::vector<float> want(x.size());
    kc::rms_norm({1e-5f}, {x.data(), rows, dim, dim}, w.data(), {want.data(), rows, dim, dim}, pool);
    std::vector<std::int32_t> index(rows);
    for (std::int32_t r = 0; r < rows; ++r) index[std::size_t(r)] = (r * 7) % rows;
    std::vector<float> want_gathered(x.size());
    for (std::int32_t r = 0; r < rows; ++r)
      std::memcpy(&want_gathered[std::size_t(r * dim)], &want[std::size_t(index[std::size_t(r)] * dim)], std::size_t(dim) * 4);
    DeviceCopy d_x(x), d_w(w), d_index(index), d_y(x.size() * 4);
    for (kv::KvDType t : kAllDtypes) {
      for (bool gather : {false, true}) {
        cuda_require(cudaMemset(d_y.as<void>(), 0xff, x.size() * 4));  // NaN: every element must be written
        kcu::RmsNormLaunch p{d_x.as<float>(), dim, gather ? d_index.as<std::int32_t>() : nullptr,
                             rows, dim, d_w.as<float>(), 1e-5f, d_y.as<void>(), t, dim};
        cuda_require(kcu::launch_rms_norm(p, nullptr));
        const double err = max_rel_error(read_as_f32(d_y, t, x.size()), gather ? want_gathered : want);
        INFO("dim " << dim << " dtype " << kv::kv_dtype_name(t) << " gather " << gather);
        CHECK(err < rounding_tolerance(t));
        if (!gather) testing::report_metric((std::string("op_err.rms_norm.") + kv::kv_dtype_name(t)).c_str(), err);
      }
    }
  }
}

TEST_CASE("CUDA RoPE matches the CPU op in both layouts, partial rotary dims and scaling",
          "[gpu][cuda_ops]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(13);
  const std::int32_t rows = 40, n_heads = 6, head_dim = 128;
  for (auto style : {kernels::RopeStyle::interleaved, kernels::RopeStyle::half_split}) {
    for (std::int32_t rope_dims : {128, 64}) {
      kc::RopeParams rp;
      rp.n_heads = n_heads;
      rp.head_dim = head_dim;
      rp.rope_dims = rope_dims;
      rp.theta = 500000.0f;
      rp.style = style;
      rp.scaling.type = rope_dims == 64 ? kernels::RopeScalingType::llama3 : kernels::RopeScalingType::none;
      rp.scaling.factor = 8.0f;
      const auto inv = kc::rope_inv_freq(rp);
      const std::int64_t stride = n_heads * head_dim + 32;  // rows with a gap, as in fused QKV
      auto x = random_floats(std::size_t(rows * stride), rng, 2.0f);
      std::vector<std::int32_t> pos(rows);
      for (auto& p : pos) p = std::int32_t(rng() % 8192);
      auto want = x;
      kc::rope(rp, inv, {want.data(), rows, n_heads * head_dim, stride}, pos);
      DeviceCopy d_x(x), d_inv(inv), d_pos(pos);
      kcu::RopeLaunch p{d_x.as<float>(), stride, rows, n_heads, head_dim, rope_dims,
                        style == kernels::RopeStyle::interleaved, d_inv.as<float>(), d_pos.as<std::int32_t>()};
      cuda_require(kcu::launch_rope(p, nullptr));
      const double err = max_rel_error(d_x.read<float>(x.size()), want);
      INFO("style " << int(style) << " rope_dims " << rope_dims);
      CHECK(err < 2e-5);
      testing::report_metric("op_err.rope.f32", err);
    }
  }
}

TEST_CASE("CUDA SiLU*mul, residual add and bias add match the CPU ops", "[gpu][cuda_ops]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(14);
  kc::ThreadPool pool(1);
  const std::int32_t rows = 19, ff = 1500;
  const auto gate_up = random_floats(std::size_t(rows * 2 * ff), rng, 6.0f);  // [rows][gate | up]
  std::vector<float> gate(std::size_t(rows * ff)), up(gate.size());
  for (std::int32_t r = 0; r < rows; ++r) {
    std::memcpy(&gate[std::size_t(r * ff)], &gate_up[std::size_t(r * 2 * ff)], std::size_t(ff) * 4);
    std::memcpy(&up[std::size_t(r * ff)], &gate_up[std::size_t(r * 2 * ff + ff)], std::size_t(ff) * 4);
  }
  std::vector<float> want = gate;
  kc::silu_mul({want.data(), rows, ff, ff}, {up.data(), rows, ff, ff}, pool);
  DeviceCopy d_in(gate_up), d_out(want.size() * 4);
  for (kv::KvDType t : kAllDtypes) {
    cuda_require(cudaMemset(d_out.as<void>(), 0xff, want.size() * 4));
    cuda_require(kcu::launch_silu_mul(d_in.as<float>(), d_in.as<float>() + ff, 2 * ff, rows, ff,
                                      d_out.as<void>(), t, ff, nullptr));
    const double err = max_rel_error(read_as_f32(d_out, t, want.size()), want);
    INFO("dtype " << kv::kv_dtype_name(t));
    CHECK(err < rounding_tolerance(t));
    testing::report_metric((std::string("op_err.silu_mul.") + kv::kv_dtype_name(t)).c_str(), err);
  }
  // Residual and bias: one F32 add per element, so exact.
  const auto x = random_floats(gate.size(), rng), bias = random_floats(std::size_t(ff), rng);
  auto want_x = x;
  kc::add_inplace({want_x.data(), rows, ff, ff}, {up.data(), rows, ff, ff});
  kc::add_bias({want_x.data(), rows, ff, ff}, bias.data());
  DeviceCopy d_x(x), d_up(up), d_bias(bias);
  cuda_require(kcu::launch_add_rows(d_x.as<float>(), ff, d_up.as<float>(), ff, rows, ff, nullptr));
  cuda_require(kcu::launch_add_bias(d_x.as<float>(), ff, rows, ff, d_bias.as<float>(), nullptr));
  CHECK(d_x.read<float>(x.size()) == want_x);
}

TEST_CASE("CUDA KV write from F32 rows stores the CPU reshape_and_cache's bytes", "[gpu][cuda_ops]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(15);
  for (kv::KvDType t : {kv::KvDType::f32, kv::KvDType::f16, kv::KvDType::bf16, kv::KvDType::q8_0, kv::KvDType::fp8}) {
    kv::KvPoolConfig c;
    c.num_blocks = 24;
    c.block_tokens = 16;
    c.n_kv_heads = 2;
    c.head_dim = 96;
    c.dtype = t;
    c.poison_freed = false;
    kv::KvPool host(c);
    std::memset(host.layer(0).data, 0, host.layer_bytes());
    const std::int32_t tokens = 50, row = 2 * 96, stride = 3 * row;  // K and V inside wider rows
    const auto qkv = random_floats(std::size_t(tokens * stride), rng);
    std::vector<float> k(std::size_t(tokens * row)), v(k.size());
    for (std::int32_t i = 0; i < tokens; ++i) {
      std::memcpy(&k[std::size_t(i * row)], &qkv[std::size_t(i * stride + row)], std::size_t(row) * 4);
      std::memcpy(&v[std::size_t(i * row)], &qkv[std::size_t(i * stride + 2 * row)], std::size_t(row) * 4);
    }
    std::vector<std::int64_t> slots(tokens);
    for (std::int32_t i = 0; i < tokens; ++i) slots[std::size_t(i)] = (i * 53) % (24 * 16);
    slots[7] = -1;
    kc::reshape_and_cache({k.data(), v.data(), kv::KvDType::f32, slots.data(), tokens, host.layer(0)});
    DeviceCopy d_qkv(qkv), d_slots(slots), d_cache(host.layer_bytes());
    cuda_require(cudaMemset(d_cache.as<void>(), 0, host.layer_bytes()));
    kv::PagedKvView view = host.layer(0);
    view.data = d_cache.as<void>();
    cuda_require(kcu::launch_cache_write_f32(d_qkv.as<float>() + row, d_qkv.as<float>() + 2 * row, stride,
                                             d_slots.as<std::int64_t>(), tokens, view, nullptr));
    const auto back = d_cache.read<std::byte>(host.layer_bytes());
    INFO("dtype " << kv::kv_dtype_name(t));
    CHECK(std::memcmp(back.data(), host.layer(0).data, back.size()) == 0);
  }
}

TEST_CASE("the fused RoPE + Q rounding + KV write equals the CPU rope then reshape_and_cache",
          "[gpu][cuda_ops]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(18);
  for (auto style : {kernels::RopeStyle::interleaved, kernels::RopeStyle::half_split}) {
    for (kv::KvDType t : {kv::KvDType::f16, kv::KvDType::bf16}) {
      const FusedRows f = fused_rows(rng, 64, style);
      const std::int32_t rows = f.rows, q_dim = f.q_dim, kv_dim = f.kv_dim, stride = f.stride;
      // References: Q rows, and an F32 cache written by the CPU op.
      const std::vector<float> want_q = f.roped_q();
      std::vector<float> k(std::size_t(rows * kv_dim)), v(k.size());
      for (std::int32_t r = 0; r < rows; ++r) {
        std::memcpy(&k[std::size_t(r * kv_dim)], &f.roped[std::size_t(r * stride + q_dim)], std::size_t(kv_dim) * 4);
        std::memcpy(&v[std::size_t(r * kv_dim)], &f.roped[std::size_t(r * stride + q_dim + kv_dim)], std::size_t(kv_dim) * 4);
      }
      kv::KvPoolConfig c;
      c.num_blocks = 4;
      c.block_tokens = 16;
      c.n_kv_heads = f.n_kv_heads;
      c.head_dim = f.head_dim;
      c.poison_freed = false;
      kv::KvPool ref(c);
      std::memset(ref.layer(0).data, 0, ref.layer_bytes());
      kc::reshape_and_cache({k.data(), v.data(), kv::KvDType::f32, f.slots.data(), rows, ref.layer(0)});
      const std::size_t cache_elems = ref.layer_bytes() / 4;
      FusedLaunch d(f);
      DeviceCopy d_q(want_q.size() * 2), d_cache(cache_elems * 2);
      cuda_require(cudaMemset(d_cache.as<void>(), 0, cache_elems * 2));
      cuda_require(cudaMemset(d_q.as<void>(), 0xff, want_q.size() * 2));
      kv::PagedKvView cache = ref.layer(0);
      cache.dtype = t;
      cache.data = d_cache.as<void>();
      cuda_require(kcu::launch_qkv_rope_cache(d.params(f, d_q, t, cache), nullptr));
      const std::vector<float> ref_cache(static_cast<const float*>(ref.layer(0).data),
                                         static_cast<const float*>(ref.layer(0).data) + cache_elems);
      INFO("dtype " << kv::kv_dtype_name(t) << " style " << int(style));
      const double q_err = max_rel_error(read_as_f32(d_q, t, want_q.size()), want_q);
      const double kv_err = max_rel_error(read_as_f32(d_cache, t, cache_elems), ref_cache);
      CHECK(q_err < rounding_tolerance(t));
      CHECK(kv_err < rounding_tolerance(t));
      testing::report_metric((std::string("op_err.qkv_rope_cache.") + kv::kv_dtype_name(t)).c_str(),
                             std::max(q_err, kv_err));
    }
  }
}

TEST_CASE("the fused RoPE + KV write into Q8_0 and FP8 caches reads back within a quant step's rounding of the F32 K/V",
          "[gpu][cuda_ops][q8_0][fp8]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(19);
  for (kv::KvDType t : {kv::KvDType::q8_0, kv::KvDType::fp8}) {
    const FusedRows f = fused_rows(rng, 48, kernels::RopeStyle::half_split);  // 96 values: Q8_0 64 + 32, FP8 3 x 32, blocks across heads
    const std::int32_t rows = f.rows, q_dim = f.q_dim, kv_dim = f.kv_dim, stride = f.stride;
    const auto& roped = f.roped;
    const auto& slots = f.slots;
    const std::vector<float> want_q = f.roped_q();
    kv::KvPoolConfig c;
    c.num_blocks = 4;
    c.block_tokens = 16;
    c.n_kv_heads = f.n_kv_heads;
    c.head_dim = f.head_dim;
    c.dtype = t;
    c.poison_freed = false;
    kv::KvPool pool(c);
    FusedLaunch d(f);
    DeviceCopy d_q(want_q.size() * 2), d_cache(pool.layer_bytes());
    cuda_require(cudaMemset(d_cache.as<void>(), 0, pool.layer_bytes()));
    kv::PagedKvView cache = pool.layer(0);
    cache.data = d_cache.as<void>();
    cuda_require(kcu::launch_qkv_rope_cache(d.params(f, d_q, kv::KvDType::bf16, cache), nullptr));
    const auto bytes = d_cache.read<std::byte>(pool.layer_bytes());
    std::memcpy(pool.layer(0).data, bytes.data(), bytes.size());
    const kv::PagedKvView view = pool.layer(0);
    double worst = 0;  // error over the allowed rounding: at most 1
    std::vector<float> got(static_cast<std::size_t>(kv_dim));
    for (std::int32_t r = 0; r < rows; ++r) {
      if (slots[std::size_t(r)] < 0) continue;
      const auto block = std::int32_t(slots[std::size_t(r)] / 16), in_block = std::int32_t(slots[std::size_t(r)] % 16);
      for (int which = 0; which < 2; ++which) {
        const std::byte* row = static_cast<const std::byte*>(view.data) + view.row_byte_offset(block, which, in_block);
        const float* want = &roped[std::size_t(r * stride + q_dim + which * kv_dim)];
        for (std::int32_t i = 0; i < kv_dim; ++i) {
          // i's block: 64 values for Q8_0 (the row's last 32 a block of their own), 32 for FP8.
          const std::int32_t per = kv::kv_block_values(t), b0 = i / per * per;
          float amax = 0.0f;
          for (std::int32_t j = b0; j < std::min(b0 + per, kv_dim); ++j) amax = std::max(amax, std::fabs(want[j]));
          double allowed = 0, value = 0;
          if (t == kv::KvDType::q8_0) {
            kc::widen_q8_0_portable(row, i, 1, &got[std::size_t(i)]);
            // 0.57 of a step: the quants are rounded with 127 / amax, read back with d's F16 rounding.
            allowed = 0.57 * amax / 127.0;
          } else {
            kv::widen_kv_row_fp8(row, i, 1, &got[std::size_t(i)]);
            allowed = std::max(std::fabs(double(want[i])) / 16.0, std::ldexp(amax / 448.0, -10)) * 1.001;
          }
          value = got[std::size_t(i)];
          worst = std::max(worst, (std::fabs(value - double(want[i])) - 1e-5) / allowed);
        }
      }
    }
    INFO("dtype " << kv::kv_dtype_name(t));
    CHECK(worst <= 1.0);
    CHECK(max_rel_error(read_as_f32(d_q, kv::KvDType::bf16, want_q.size()), want_q) < rounding_tolerance(kv::KvDType::bf16));
  }
}

TEST_CASE("cuBLAS products of F16/BF16 rows and weights match an F64 reference, beta adds",
          "[gpu][cuda_ops]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(16);
  cudaStream_t stream = nullptr;
  cuda_require(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto ctx = backend::cuda::CublasContext::create(stream);
  REQUIRE(ctx.has_value());
  const std::int32_t rows = 37, in = 1024, out = 768;
  for (bool bf16 : {false, true}) {
    const auto xw = testing::to_half_words(random_floats(std::size_t(rows * in), rng), bf16);
    const auto ww = testing::to_half_words(random_floats(std::size_t(out * in), rng, 0.05f), bf16);
    const auto x = testing::from_half_words(xw, bf16), w = testing::from_half_words(ww, bf16);
    const auto y0 = random_floats(std::size_t(rows * out), rng);
    std::vector<float> want(y0.size());
    for (std::int32_t r = 0; r < rows; ++r)
      for (std::int32_t o = 0; o < out; ++o) {
        double acc = 0;
        for (std::int32_t i = 0; i < in; ++i) acc += double(x[std::size_t(r * in + i)]) * w[std::size_t(o * in + i)];
        want[std::size_t(r * out + o)] = float(acc + y0[std::size_t(r * out + o)]);
      }
    DeviceCopy d_x(xw), d_w(ww), d_y(y0);
    const kv::KvDType t = bf16 ? kv::KvDType::bf16 : kv::KvDType::f16;
    auto ok = backend::cuda::gemm_rows(**ctx, {d_x.as<void>(), t, in, d_w.as<void>(), rows, out, in,
                                               d_y.as<void>(), kv::KvDType::f32, out, 1.0f});
    INFO((ok ? std::string() : ok.error().message));
    REQUIRE(ok.has_value());
    cuda_require(cudaStreamSynchronize(stream));
    const double err = max_rel_error(d_y.read<float>(want.size()), want);
    INFO("bf16 " << bf16);
    CHECK(err < 1e-4);
    testing::report_metric(bf16 ? "op_err.gemm.bf16" : "op_err.gemm.f16", err);
  }
  ctx->reset();
  cuda_require(cudaStreamDestroy(stream));
}

TEST_CASE("KV blocks round-trip device -> pinned host -> device on a copy stream",
          "[gpu][cuda_ops]") {
  testing::require_cuda_device();
  std::mt19937_64 rng(17);
  kv::KvPoolConfig c;
  c.num_blocks = 8;
  c.block_tokens = 16;
  c.n_layers = 3;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.dtype = kv::KvDType::bf16;
  c.poison_freed = false;
  kv::KvPool source(c);
  for (std::int32_t l = 0; l < c.n_layers; ++l) {
    auto* words = static_cast<std::uint16_t*>(source.layer(l).data);
    for (std::size_t i = 0; i < source.layer_bytes() / 2; ++i) words[i] = std::uint16_t(rng());
  }
  c.tier = kv::Tier::device;
  auto device = backend::cuda::CudaKvPool::create(c);
  c.tier = kv::Tier::host;
  auto pinned = backend::cuda::CudaKvPool::create(c);
  REQUIRE(device.has_value());
  REQUIRE(pinned.has_value());
  CHECK(pinned->kind() == backend::cuda::MemoryKind::pinned_host);
  REQUIRE(device->upload(source).has_value());
  cudaStream_t copy = nullptr;
  cuda_require(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  const backend::cuda::BlockCopy out[] = {{kv::BlockId{1}, kv::BlockId{5}}, {kv::BlockId{6}, kv::BlockId{0}}};
  const backend::cuda::BlockCopy back[] = {{kv::BlockId{5}, kv::BlockId{2}}, {kv::BlockId{0}, kv::BlockId{3}}};
  REQUIRE(backend::cuda::copy_blocks_async(*device, *pinned, out, copy).has_value());
  REQUIRE(backend::cuda::copy_blocks_async(*pinned, *device, back, copy).has_value());
  cuda_require(cudaStreamSynchronize(copy));
  cuda_require(cudaStreamDestroy(copy));
  kv::KvPool result(source.config());
  REQUIRE(device->download(result).has_value());
  const std::size_t block = device->block_bytes_per_layer();
  for (std::int32_t l = 0; l < c.n_layers; ++l) {
    const auto* want = static_cast<const std::byte*>(source.layer(l).data);
    const auto* got = static_cast<const std::byte*>(result.layer(l).data);
    CHECK(std::memcmp(got + 2 * block, want + 1 * block, block) == 0);
    CHECK(std::memcmp(got + 3 * block, want + 6 * block, block) == 0);
    CHECK(std::memcmp(got + 4 * block, want + 4 * block, block) == 0);  // untouched
  }
  CHECK_FALSE(backend::cuda::copy_blocks_async(*device, *pinned,
                                               std::vector<backend::cuda::BlockCopy>{{kv::BlockId{8}, kv::BlockId{0}}},
                                               nullptr)
                  .has_value());
}

TEST_CASE("the KV budget takes what is in use off fraction * total and never exceeds free memory",
          "[cuda_backend]") {
  using backend::cuda::kv_blocks_for_budget;
  const std::size_t gib = std::size_t(1) << 30;
  // 80 GiB card, 20 GiB in use (weights), 90%: 72 - 20 = 52 GiB of 1 MiB blocks.
  CHECK(kv_blocks_for_budget({60 * gib, 80 * gib}, 0.9, std::size_t(1) << 20) == 52 * 1024);
  // A reserve comes off too.
  CHECK(kv_blocks_for_budget({60 * gib, 80 * gib}, 0.9, std::size_t(1) << 20, 2 * gib) == 50 * 1024);
  // Another process holds most of the card: only what is free counts.
  CHECK(kv_blocks_for_budget({5 * gib, 80 * gib}, 1.0, std::size_t(1) << 20) == 5 * 1024);
  // Already past the fraction: nothing.
  CHECK(kv_blocks_for_budget({10 * gib, 80 * gib}, 0.5, std::size_t(1) << 20) == 0);
  CHECK(kv_blocks_for_budget({10 * gib, 80 * gib}, 0.9, 0) == 0);
}

TEST_CASE("a fixed split plan covers every KV position of each decode row once, in order",
          "[cuda_backend]") {
  const std::vector<std::int32_t> context = {1, 31, 32, 33, 300, 1000};
  for (std::int32_t splits : {1, 3, 16}) {
    const auto plan = backend::cuda::fixed_split_decode_plan(context, splits, 32);
    REQUIRE(plan.items.size() == context.size() * std::size_t(splits));
    CHECK(plan.merges.size() == (splits > 1 ? context.size() : 0));
    for (std::size_t s = 0; s < context.size(); ++s) {
      std::int32_t next = 0;
      for (std::int32_t p = 0; p < splits; ++p) {
        const auto& item = plan.items[s * std::size_t(splits) + std::size_t(p)];
        CHECK(item.seq == std::int32_t(s));
        CHECK(item.kv_begin == std::min(next, context[s]));
        CHECK(item.kv_end >= item.kv_begin);
        CHECK((item.kv_begin % 32 == 0 || item.kv_begin == context[s]));
        CHECK(item.merge == (splits > 1 ? std::int32_t(s) : -1));
        next = std::max(next, item.kv_end);
      }
      CHECK(next == context[s]);
      if (splits > 1) {
        CHECK(plan.merges[s].first_item == std::int32_t(s) * splits);
        CHECK(plan.merges[s].item_count == splits);
      }
    }
  }
}

TEST_CASE("a host batch packs tokens, slots, block tables and logits rows at the layout's offsets",
          "[cuda_backend]") {
  const std::vector<std::int32_t> a = {5, 6, 7}, b = {9};
  const std::vector<kv::BlockId> blocks_a = {kv::BlockId{4}, kv::BlockId{2}, kv::BlockId{6}}, blocks_b = {kv::BlockId{7}};
  const model::PagedSequence batch[] = {{a, 14, blocks_a, true}, {b, 3, blocks_b, false}};
  backend::cuda::HostBatch hb;
  backend::cuda::build_host_batch(batch, 8, 100, 4, hb);
  CHECK(hb.tokens == std::vector<std::int32_t>{5, 6, 7, 9});
  CHECK(hb.positions == std::vector<std::int32_t>{14, 15, 16, 3});
  // Position 14: logical block 1 (physical 2), offset 6; 16: logical 2 (physical 6), offset 0.
  CHECK(hb.slots == std::vector<std::int64_t>{2 * 8 + 6, 2 * 8 + 7, 6 * 8, 7 * 8 + 3});
  CHECK(hb.q_start == std::vector<std::int32_t>{0, 3, 4});
  CHECK(hb.context == std::vector<std::int32_t>{17, 4});
  CHECK(hb.logit_rows == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(hb.output.first_row == std::vector<std::size_t>{0, 3, 4});
  CHECK(hb.output.row_position == std::vector<std::int32_t>{14, 15, 16, 3});
  CHECK(hb.table == std::vector<std::int32_t>{4, 2, 6, 0, 7, 0, 0, 0});
  CHECK_FALSE(hb.decode_only());
  hb.plan = backend::cuda::fixed_split_decode_plan(hb.context, 2, 32);
  const auto layout = backend::cuda::BatchLayout::of(hb);
  std::vector<std::byte> staging(layout.bytes);
  backend::cuda::pack_batch(hb, layout, staging.data());
  std::int64_t slot = 0;
  std::memcpy(&slot, staging.data() + layout.slots + 3 * 8, 8);
  CHECK(slot == 7 * 8 + 3);
  std::int32_t table_entry = 0;
  std::memcpy(&table_entry, staging.data() + layout.table + 4 * 4, 4);
  CHECK(table_entry == 7);
  kernels::AttentionMerge merge{};
  std::memcpy(&merge, staging.data() + layout.merges + sizeof(merge), sizeof(merge));
  CHECK(merge.seq == 1);
  CHECK(merge.first_item == 2);
  CHECK(layout.items % alignof(kernels::AttentionWorkItem) == 0);
  CHECK(layout.merges % alignof(kernels::AttentionMerge) == 0);
}
#endif  // PENSIEVE_HAVE_CUDA
