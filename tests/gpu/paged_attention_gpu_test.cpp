// CUDA paged attention against the CPU kernel and the F64 reference on random
// batches. Runs only on a machine with a GPU (tests/gpu/device-checks.sh).
#ifdef PENSIEVE_HAVE_CUDA
#include "gpu/kernels/cpu/paged_attention.hpp"
#include "gpu/kernels/cuda/paged_attention_cuda.hpp"
#include "tests/gpu/cuda_test_support.hpp"
#include "tests/gpu/paged_attention_fixture.hpp"

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstring>
#include <limits>
#include <optional>

using namespace pensieve;
using namespace pensieve::kernels;

namespace {

void cuda_ok(cudaError_t e) {
  INFO(cudaGetErrorName(e) << ": " << cudaGetErrorString(e));
  REQUIRE(e == cudaSuccess);
}

// A device copy of a host array, freed on destruction.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) {
    cuda_ok(cudaMalloc(&ptr, std::max<std::size_t>(bytes, 1)));
  }
  DeviceBuffer(const void* src, std::size_t bytes) : DeviceBuffer(bytes) {
    cuda_ok(cudaMemcpy(ptr, src, bytes, cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { (void)cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

std::vector<std::uint16_t> narrow(const std::vector<float>& x, kv::KvDType t) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    out[i] = t == kv::KvDType::f16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
  return out;
}

// Queries and output in q_dtype (the cache's dtype unless it is block-quantised).
std::vector<float> run_cuda(const test::Batch& b, const AttentionPlan& plan,
                            std::optional<kv::KvDType> q_dtype = std::nullopt) {
  const kv::KvDType t = q_dtype.value_or(b.spec.dtype);
  const std::size_t elem = kv::kv_dtype_bytes(t), out_bytes = std::size_t(b.out_elems()) * elem;
  const auto q16 = t == kv::KvDType::f32 ? std::vector<std::uint16_t>{} : narrow(b.q, t);
  DeviceBuffer q(t == kv::KvDType::f32 ? static_cast<const void*>(b.q.data()) : q16.data(),
                 b.q.size() * elem);
  DeviceBuffer out(out_bytes);
  cuda_ok(
      cudaMemset(out.ptr, 0xff, out_bytes));  // NaN in every dtype: every element must be written
  DeviceBuffer cache(b.pool->layer(0).data, b.pool->layer_bytes());
  DeviceBuffer q_start(b.q_start.data(), b.q_start.size() * 4);
  DeviceBuffer context(b.spec.context_tokens.data(), b.spec.context_tokens.size() * 4);
  DeviceBuffer table(b.block_table.data(), b.block_table.size() * 4);
  PagedAttentionParams p = b.params(nullptr);
  p.q = q.ptr;
  p.out = out.ptr;
  p.q_dtype = t;
  p.kv.data = cache.ptr;
  p.q_start = static_cast<const std::int32_t*>(q_start.ptr);
  p.context_tokens = static_cast<const std::int32_t*>(context.ptr);
  p.block_table = static_cast<const std::int32_t*>(table.ptr);
  cuda::AttentionDeviceWorkspace ws;
  auto ran = cuda::paged_attention(p, plan, ws, nullptr);
  INFO((ran ? std::string() : ran.error().message));
  REQUIRE(ran.has_value());
  cuda_ok(cudaDeviceSynchronize());
  std::vector<float> result(std::size_t(b.out_elems()));
  if (t == kv::KvDType::f32) {
    cuda_ok(cudaMemcpy(result.data(), out.ptr, out_bytes, cudaMemcpyDeviceToHost));
  } else {
    std::vector<std::uint16_t> raw(result.size());
    cuda_ok(cudaMemcpy(raw.data(), out.ptr, out_bytes, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < raw.size(); ++i)
      result[i] = t == kv::KvDType::f16 ? f16_to_f32(raw[i]) : bf16_to_f32(raw[i]);
  }
  return result;
}

test::BatchSpec gpu_spec(std::mt19937_64& rng, kv::KvDType dtype) {
  test::BatchSpec spec;
  const std::int32_t groups[] = {1, 4, 8}, blocks[] = {8, 16, 32}, dims[] = {64, 80, 128, 256};
  spec.group = groups[rng() % 3];
  spec.block_tokens = blocks[rng() % 3];
  spec.head_dim = dims[rng() % 4];
  spec.n_kv_heads = 1 + std::int32_t(rng() % 4);
  spec.dtype = dtype;
  const auto n = 1 + std::int32_t(rng() % 64);
  // Keeps the F64 reference to a few hundred million multiply-adds.
  double budget = 3e8 / double(spec.n_kv_heads * spec.group * spec.head_dim);
  for (std::int32_t s = 0; s < n; ++s) {
    auto ctx = 1 + std::int32_t(rng() % (s % 8 == 0 ? 8192 : 2048));
    auto q_len = s % 3 == 0 ? std::min(ctx, 1 + std::int32_t(rng() % 512)) : 1;
    while (double(ctx) * q_len > std::max(budget, 1.0) && ctx > 1) {
      ctx = std::max(1, ctx / 2);
      q_len = std::min(q_len, ctx);
    }
    budget -= double(ctx) * q_len;
    spec.context_tokens.push_back(ctx);
    spec.q_lens.push_back(q_len);
  }
  return spec;
}

}  // namespace

TEST_CASE("CUDA paged attention matches the CPU kernel for every decode strategy", "[gpu]") {
  pensieve::testing::require_cuda_device();
  std::mt19937_64 rng(2026);
  test::PooledRunner pooled(8);
  cpu::WorkRunner& pool = pooled.runner;
  for (int trial = 0; trial < 12; ++trial) {
    const kv::KvDType dtype = trial % 3 == 0   ? kv::KvDType::f32
                              : trial % 3 == 1 ? kv::KvDType::f16
                                               : kv::KvDType::bf16;
    const test::Batch b = test::make_batch(gpu_spec(rng, dtype), rng);
    // The CPU kernel reads the same (rounded) cache and queries in F32.
    const auto cpu_plan =
        plan_paged_attention({b.q_start, b.spec.context_tokens}, b.spec.n_kv_heads).value();
    std::vector<float> cpu_out(std::size_t(b.out_elems()), std::numeric_limits<float>::quiet_NaN());
    cpu::AttentionWorkspace cpu_ws;
    cpu::paged_attention(b.params(cpu_out.data()), cpu_plan, cpu_ws, pool);
    const auto ref = test::reference_attention(b);
    for (DecodePlanChoice choice : {DecodePlanChoice{DecodeStrategy::per_sequence, 1, 0},
                                    DecodePlanChoice{DecodeStrategy::split_kv, 16, 0},
                                    DecodePlanChoice{DecodeStrategy::packed, 1, 4}}) {
      AttentionPlanOptions o;
      o.decode = choice;
      o.workers = 132;
      const auto plan =
          plan_paged_attention({b.q_start, b.spec.context_tokens}, b.spec.n_kv_heads, o).value();
      const auto gpu_out = run_cuda(b, plan);
      // Outputs are rounded to the activation dtype: 2^-11 for F16, 2^-8 for BF16.
      const double tol = dtype == kv::KvDType::f32 ? 1e-5 : dtype == kv::KvDType::f16 ? 2e-3 : 1e-2;
      INFO("trial " << trial << " dtype " << kv::kv_dtype_name(dtype) << " plan "
                    << choice.describe());
      CHECK(test::max_relative_error(gpu_out, ref, b.spec.head_dim) < tol);
      std::vector<double> cpu_as_ref(cpu_out.begin(), cpu_out.end());
      CHECK(test::max_relative_error(gpu_out, cpu_as_ref, b.spec.head_dim) < tol);
    }
  }
}

TEST_CASE("CUDA paged attention over Q8_0 and FP8 caches matches the CPU kernel reading the same bytes",
          "[gpu][q8_0][fp8]") {
  // The cache is the CPU op's bytes; both kernels dequantise it with the same
  // products, so with F32 queries they differ by F32 summation order only,
  // and both stay within the CPU kernel's bound against the F64 reference on
  // the unquantised values (paged_attention_cpu_test.cpp).
  pensieve::testing::require_cuda_device();
  std::mt19937_64 rng(2027);
  test::PooledRunner pooled(8);
  cpu::WorkRunner& pool = pooled.runner;
  for (int trial = 0; trial < 8; ++trial) {
    const kv::KvDType dtype = trial % 2 == 0 ? kv::KvDType::q8_0 : kv::KvDType::fp8;
    test::BatchSpec spec = gpu_spec(rng, dtype);
    if ((spec.n_kv_heads * spec.head_dim) % 32 != 0) spec.head_dim = 64;  // rows of whole blocks
    const test::Batch b = test::make_batch(spec, rng);
    const auto cpu_plan = plan_paged_attention({b.q_start, b.spec.context_tokens}, b.spec.n_kv_heads).value();
    std::vector<float> cpu_out(std::size_t(b.out_elems()), std::numeric_limits<float>::quiet_NaN());
    cpu::AttentionWorkspace cpu_ws;
    cpu::paged_attention(b.params(cpu_out.data()), cpu_plan, cpu_ws, pool);
    const std::vector<double> cpu_as_ref(cpu_out.begin(), cpu_out.end());
    const auto ref = test::reference_attention(b);
    for (kv::KvDType q_dtype : {kv::KvDType::f32, kv::KvDType::bf16}) {
      AttentionPlanOptions o;
      o.decode = DecodePlanChoice{DecodeStrategy::split_kv, 16, 0};
      o.workers = 132;
      const auto plan = plan_paged_attention({b.q_start, b.spec.context_tokens}, b.spec.n_kv_heads, o).value();
      const auto gpu_out = run_cuda(b, plan, q_dtype);
      INFO("trial " << trial << " kv " << kv::kv_dtype_name(dtype) << " q " << kv::kv_dtype_name(q_dtype));
      const double vs_cpu = test::max_relative_error(gpu_out, cpu_as_ref, b.spec.head_dim);
      CHECK(vs_cpu < (q_dtype == kv::KvDType::f32 ? 1e-5 : 2.5e-2));  // BF16: the queries rounded too
      CHECK(test::max_relative_error(gpu_out, ref, b.spec.head_dim) < (dtype == kv::KvDType::q8_0 ? 4e-2 : 0.25));
      pensieve::testing::report_metric(
          (std::string("attn_err_vs_cpu.") + kv::kv_dtype_name(dtype) + "." + kv::kv_dtype_name(q_dtype)).c_str(),
          vs_cpu);
    }
  }
}

TEST_CASE("CUDA reshape_and_cache quantises to the CPU op's Q8_0 and FP8 bytes", "[gpu][q8_0][fp8]") {
  pensieve::testing::require_cuda_device();
  for (kv::KvDType dtype : {kv::KvDType::q8_0, kv::KvDType::fp8}) {
    std::mt19937_64 rng(4);
    kv::KvPoolConfig c;
    c.num_blocks = 16;
    c.block_tokens = 8;
    c.n_kv_heads = 2;
    c.head_dim = 80;  // 160 values: Q8_0 64 + 64 + 32, FP8 5 x 32; blocks across the heads' boundary
    c.dtype = dtype;
    c.poison_freed = false;
    kv::KvPool host(c);
    std::memset(host.layer(0).data, 0, host.layer_bytes());
    const std::int32_t tokens = 40;
    std::vector<float> k(std::size_t(tokens) * 160), v(k.size());
    for (auto& x : k) x = 3.0f * test::nonzero_uniform(rng);
    for (auto& x : v) x = 0.1f * test::nonzero_uniform(rng);
    for (std::size_t i = 0; i < 64; ++i) k[i] = 0.0f;  // an all-zero block (two of FP8's)
    std::vector<std::int64_t> slots(tokens);
    for (std::int32_t t = 0; t < tokens; ++t) slots[t] = (t * 37) % (16 * 8);
    slots[5] = -1;
    cpu::reshape_and_cache({k.data(), v.data(), kv::KvDType::f32, slots.data(), tokens, host.layer(0)});
    DeviceBuffer dk(k.data(), k.size() * 4), dv(v.data(), v.size() * 4), ds(slots.data(), slots.size() * 8);
    DeviceBuffer cache(host.layer_bytes());
    cuda_ok(cudaMemset(cache.ptr, 0, host.layer_bytes()));
    ReshapeAndCacheParams dp{dk.ptr, dv.ptr, kv::KvDType::f32, static_cast<const std::int64_t*>(ds.ptr), tokens,
                             host.layer(0)};
    dp.cache.data = cache.ptr;
    REQUIRE(cuda::reshape_and_cache(dp, nullptr).has_value());
    std::vector<std::byte> back(host.layer_bytes());
    cuda_ok(cudaMemcpy(back.data(), cache.ptr, back.size(), cudaMemcpyDeviceToHost));
    INFO("dtype " << kv::kv_dtype_name(dtype));
    CHECK(std::memcmp(back.data(), host.layer(0).data, back.size()) == 0);
  }
}

TEST_CASE("CUDA reshape_and_cache writes the same bytes as the CPU op", "[gpu]") {
  pensieve::testing::require_cuda_device();
  std::mt19937_64 rng(3);
  kv::KvPoolConfig c;
  c.num_blocks = 16;
  c.block_tokens = 8;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.dtype = kv::KvDType::f16;
  kv::KvPool host(c);
  std::memset(host.layer(0).data, 0, host.layer_bytes());
  const std::int32_t tokens = 40;
  std::vector<float> k(std::size_t(tokens) * 128), v(k.size());
  for (auto& x : k) x = test::nonzero_uniform(rng);
  for (auto& x : v) x = test::nonzero_uniform(rng);
  std::vector<std::int64_t> slots(tokens);
  for (std::int32_t t = 0; t < tokens; ++t) slots[t] = (t * 37) % (16 * 8);
  slots[5] = -1;
  ReshapeAndCacheParams p{k.data(),     v.data(), kv::KvDType::f32,
                          slots.data(), tokens,   host.layer(0)};
  cpu::reshape_and_cache(p);
  const auto k16 = narrow(k, c.dtype), v16 = narrow(v, c.dtype);
  DeviceBuffer dk(k16.data(), k16.size() * 2), dv(v16.data(), v16.size() * 2),
      ds(slots.data(), slots.size() * 8);
  DeviceBuffer cache(host.layer_bytes());
  cuda_ok(cudaMemset(cache.ptr, 0, host.layer_bytes()));
  ReshapeAndCacheParams dp{dk.ptr,           dv.ptr,
                           kv::KvDType::f16, static_cast<const std::int64_t*>(ds.ptr),
                           tokens,           host.layer(0)};
  dp.cache.data = cache.ptr;
  REQUIRE(cuda::reshape_and_cache(dp, nullptr).has_value());
  std::vector<std::byte> back(host.layer_bytes());
  cuda_ok(cudaMemcpy(back.data(), cache.ptr, back.size(), cudaMemcpyDeviceToHost));
  CHECK(std::memcmp(back.data(), host.layer(0).data, back.size()) == 0);
}
#endif  // PENSIEVE_HAVE_CUDA
