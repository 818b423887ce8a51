#include "gpu/backend/cuda/cuda_weights.hpp"

#include "gpu/backend/cuda/cuda_check.hpp"
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cuda/ops_launch.hpp"
#include "gpu/model/forward_scratch.hpp"
#include "gpu/formats/half.hpp"

#include <cmath>
#include <cstring>
#include <string>

namespace pensieve::backend::cuda {
namespace {

namespace kc = kernels::cpu;

std::size_t rounded(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// The arena size and the pieces' element counts of one model in `dtype`.
struct Layout {
  std::size_t elem = 2;
  std::int64_t dim, qkv_rows, q, ff, vocab, half_rope;
  bool tied, bias;
  std::size_t arena_bytes() const {
    const std::size_t layer = rounded(std::size_t(qkv_rows * dim) * elem) +
                              rounded(std::size_t(dim * q) * elem) +
                              rounded(std::size_t(2 * ff * dim) * elem) +
                              rounded(std::size_t(dim * ff) * elem) + 2 * rounded(std::size_t(dim) * 4) +
                              (bias ? rounded(std::size_t(qkv_rows) * 4) : 0);
    return layer_count * layer + (tied ? 1 : 2) * rounded(std::size_t(vocab * dim) * elem) +
           rounded(std::size_t(dim) * 4) + rounded(std::size_t(half_rope) * 4);
  }
  std::size_t matrix_bytes_per_token() const {
    return std::size_t(layer_count) *
               std::size_t(qkv_rows * dim + dim * q + 2 * ff * dim + dim * ff) * elem +
           std::size_t(vocab * dim) * elem;
  }
  std::int64_t layer_count;
};

Layout layout_of(const model::ModelConfig& c, kv::KvDType dtype) {
  Layout l;
  l.elem = kv::kv_dtype_bytes(dtype);
  l.dim = c.dim;
  l.q = c.q_dim();
  l.qkv_rows = c.q_dim() + 2 * std::int64_t(c.kv_dim());
  l.ff = c.ff_dim;
  l.vocab = c.vocab_size;
  l.half_rope = (c.rope_dims > 0 ? c.rope_dims : c.head_dim) / 2;
  l.tied = c.tied_output;
  l.bias = c.qkv_bias;
  l.layer_count = c.n_layers;
  return l;
}

// Every piece of the model taken from the arena, in one order for both builders.
struct Pieces {
  DeviceWeights w;
  std::vector<void*> qkv, o, gate_up, down;
  std::vector<float*> attn_norm, ffn_norm, b_qkv;
  void* embedding = nullptr;
  void* output = nullptr;
  float* output_norm = nullptr;
  float* inv_freq = nullptr;
};

Result<Pieces> carve(const model::ModelConfig& c, kv::KvDType dtype, bool tied) {
  if (dtype == kv::KvDType::f32) return fail("cuda weights: the compute dtype must be f16 or bf16");
  Pieces p;
  p.w.config = c;
  p.w.config.tied_output = tied;
  p.w.dtype = dtype;
  const Layout l = layout_of(p.w.config, dtype);
  auto arena = MemoryArena::create(l.arena_bytes());
  if (!arena) return fail("cuda weights: " + arena.error().message);
  p.w.arena = std::move(*arena);
  MemoryArena& a = p.w.arena;
  auto take = [&](std::size_t bytes) { return a.take(bytes).value(); };  // sized above: cannot fail
  for (std::int64_t i = 0; i < l.layer_count; ++i) {
    p.qkv.push_back(take(std::size_t(l.qkv_rows * l.dim) * l.elem));
    p.o.push_back(take(std::size_t(l.dim * l.q) * l.elem));
    p.gate_up.push_back(take(std::size_t(2 * l.ff * l.dim) * l.elem));
    p.down.push_back(take(std::size_t(l.dim * l.ff) * l.elem));
    p.attn_norm.push_back(static_cast<float*>(take(std::size_t(l.dim) * 4)));
    p.ffn_norm.push_back(static_cast<float*>(take(std::size_t(l.dim) * 4)));
    p.b_qkv.push_back(l.bias ? static_cast<float*>(take(std::size_t(l.qkv_rows) * 4)) : nullptr);
    p.w.layers.push_back({p.qkv.back(), p.o.back(), p.gate_up.back(), p.down.back(),
                          p.attn_norm.back(), p.ffn_norm.back(), p.b_qkv.back()});
  }
  p.embedding = take(std::size_t(l.vocab * l.dim) * l.elem);
  p.output = tied ? p.embedding : take(std::size_t(l.vocab * l.dim) * l.elem);
  p.output_norm = static_cast<float*>(take(std::size_t(l.dim) * 4));
  p.inv_freq = static_cast<float*>(take(std::size_t(l.half_rope) * 4));
  p.w.token_embedding = p.embedding;
  p.w.output = p.output;
  p.w.output_norm = p.output_norm;
  p.w.inv_freq = p.inv_freq;
  p.w.matrix_bytes_per_token = l.matrix_bytes_per_token();
  return p;
}

// Appends a stored matrix's rows, converted to dtype, to `out` (16-bit words).
void append_converted(const kc::WeightView& v, kv::KvDType dtype, std::vector<std::uint16_t>& out) {
  std::vector<float> row(std::size_t(v.cols));
  const std::size_t base = out.size();
  out.resize(base + std::size_t(v.rows * v.cols));
  std::uint16_t* dst = out.data() + base;
  const model::DType same = dtype == kv::KvDType::bf16 ? model::DType::bf16 : model::DType::f16;
  for (std::int64_t r = 0; r < v.rows; ++r, dst += v.cols) {
    if (v.dtype == same) {
      std::memcpy(dst, v.row(r), std::size_t(v.cols) * 2);
      continue;
    }
    kc::dequantize_row(v.dtype, v.row(r), v.cols, row.data());
    for (std::int64_t i = 0; i < v.cols; ++i)
      dst[i] = dtype == kv::KvDType::bf16 ? f32_to_bf16(row[std::size_t(i)]) : f32_to_f16(row[std::size_t(i)]);
  }
}

Result<void> upload(void* dst, const void* src, std::size_t bytes) {
  PENSIEVE_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return {};
}

Result<void> upload_matrices(void* dst, std::initializer_list<const kc::WeightView*> parts,
                             kv::KvDType dtype) {
  std::vector<std::uint16_t> staged;
  for (const kc::WeightView* v : parts) append_converted(*v, dtype, staged);
  return upload(dst, staged.data(), staged.size() * 2);
}

Result<void> upload_floats(float* dst, const std::vector<float>& v) {
  return upload(dst, v.data(), v.size() * sizeof(float));
}

}  // namespace

Result<DeviceWeights> upload_weights(const model::ModelWeights& weights, kv::KvDType dtype) {
  auto prepared = model::prepare_weights(weights);
  if (!prepared) return prepared.error();
  const bool tied = !weights.output.present() || weights.output.data == weights.token_embedding.data;
  auto pieces = carve(weights.config, dtype, tied);
  if (!pieces) return pieces.error();
  Pieces& p = *pieces;
  for (std::size_t i = 0; i < prepared->layers.size(); ++i) {
    const model::PreparedLayer& l = prepared->layers[i];
    for (auto ok : {upload_matrices(p.qkv[i], {&l.wq, &l.wk, &l.wv}, dtype),
                    upload_matrices(p.o[i], {&l.wo}, dtype),
                    upload_matrices(p.gate_up[i], {&l.w_gate, &l.w_up}, dtype),
                    upload_matrices(p.down[i], {&l.w_down}, dtype),
                    upload_floats(p.attn_norm[i], l.attn_norm),
                    upload_floats(p.ffn_norm[i], l.ffn_norm)}) {
      if (!ok) return ok.error();
    }
    if (p.b_qkv[i] != nullptr) {
      std::vector<float> b = l.bq;
      b.insert(b.end(), l.bk.begin(), l.bk.end());
      b.insert(b.end(), l.bv.begin(), l.bv.end());
      if (auto ok = upload_floats(p.b_qkv[i], b); !ok) return ok.error();
    }
  }
  if (auto ok = upload_matrices(p.embedding, {&prepared->token_embedding}, dtype); !ok) return ok.error();
  if (!tied) {
    if (auto ok = upload_matrices(p.output, {&prepared->output}, dtype); !ok) return ok.error();
  }
  if (auto ok = upload_floats(p.output_norm, prepared->output_norm); !ok) return ok.error();
  if (auto ok = upload_floats(p.inv_freq, prepared->inv_freq); !ok) return ok.error();
  return std::move(p.w);
}

Result<DeviceWeights> random_weights(const model::ModelConfig& config, kv::KvDType dtype,
                                     std::uint64_t seed) {
  auto pieces = carve(config, dtype, config.tied_output);
  if (!pieces) return pieces.error();
  Pieces& p = *pieces;
  const Layout l = layout_of(p.w.config, dtype);
  std::uint64_t next = seed * 1000003u;
  auto fill = [&](void* dst, kv::KvDType t, std::int64_t n, float scale) {
    return check_cuda(kernels::cuda::launch_fill_uniform(dst, t, n, next++, scale, nullptr),
                      "launch_fill_uniform");
  };
  // Scales keep activations O(1): weights ~ 1/sqrt(fan_in), norms near 1 in magnitude.
  const float w_dim = 1.7f / std::sqrt(float(l.dim)), w_q = 1.7f / std::sqrt(float(l.q)),
              w_ff = 1.7f / std::sqrt(float(l.ff));
  for (std::size_t i = 0; i < p.qkv.size(); ++i) {
    for (auto ok : {fill(p.qkv[i], dtype, l.qkv_rows * l.dim, w_dim), fill(p.o[i], dtype, l.dim * l.q, w_q),
                    fill(p.gate_up[i], dtype, 2 * l.ff * l.dim, w_dim),
                    fill(p.down[i], dtype, l.dim * l.ff, w_ff),
                    fill(p.attn_norm[i], kv::KvDType::f32, l.dim, 1.0f),
                    fill(p.ffn_norm[i], kv::KvDType::f32, l.dim, 1.0f)}) {
      if (!ok) return ok.error();
    }
    if (p.b_qkv[i] != nullptr) {
      if (auto ok = fill(p.b_qkv[i], kv::KvDType::f32, l.qkv_rows, 0.1f); !ok) return ok.error();
    }
  }
  if (auto ok = fill(p.embedding, dtype, l.vocab * l.dim, 1.0f); !ok) return ok.error();
  if (p.output != p.embedding) {
    if (auto ok = fill(p.output, dtype, l.vocab * l.dim, w_dim); !ok) return ok.error();
  }
  if (auto ok = fill(p.output_norm, kv::KvDType::f32, l.dim, 1.0f); !ok) return ok.error();
  kernels::cpu::RopeParams rope;
  rope.head_dim = config.head_dim;
  rope.rope_dims = config.rope_dims > 0 ? config.rope_dims : config.head_dim;
  rope.theta = config.rope_theta;
  rope.scaling = config.rope_scaling;
  if (auto ok = upload_floats(p.inv_freq, kernels::cpu::rope_inv_freq(rope)); !ok) return ok.error();
  PENSIEVE_CUDA_TRY(cudaDeviceSynchronize());
  return std::move(p.w);
}

}  // namespace pensieve::backend::cuda
