// CudaForward's launches: the kernels of one pass (eager or captured) and the
// decode graphs.
#include "gpu/backend/cuda/cuda_check.hpp"
#include "gpu/backend/cuda/cuda_forward.hpp"
#include "gpu/backend/cuda/cuda_forward_internal.hpp"
#include "gpu/kernels/cuda/attention_launch.hpp"
#include "gpu/kernels/cuda/ops_launch.hpp"
#include "gpu/model/tp_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pensieve::backend::cuda {

namespace kcu = kernels::cuda;

namespace {

template <class T>
const T* at(const std::byte* meta, std::size_t offset) {
  return reinterpret_cast<const T*>(meta + offset);
}

}  // namespace

Result<void> CudaForward::enqueue_pass(const BatchLayout& layout, const std::byte* meta,
                                       float* partial, const CudaKvPool& pool) {
  const model::ModelConfig& c = weights_.config;
  const Buffers& b = *buffers_;
  const kv::KvDType dt = weights_.dtype;
  const cudaStream_t s = stream_;
  const std::int32_t n = layout.n_tokens, dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(),
                     qkv_cols = q_dim + 2 * kv_dim, ff = c.ff_dim;
  const auto* positions = at<std::int32_t>(meta, layout.positions);
  const auto* slots = at<std::int64_t>(meta, layout.slots);
  const auto* items = at<kernels::AttentionWorkItem>(meta, layout.items);
  const auto* merges = at<kernels::AttentionMerge>(meta, layout.merges);
  auto gemm = [&](const void* x, std::int32_t in, const void* w, std::int32_t rows, std::int32_t out,
                  float* y, float beta) {
    return gemm_rows(*cublas_, {x, dt, in, w, rows, out, in, y, kv::KvDType::f32, out, beta});
  };
  auto norm = [&](const float* weight, const std::int32_t* row_index, std::int32_t rows) {
    kcu::RmsNormLaunch p;
    p.x = b.x;
    p.x_stride = dim;
    p.row_index = row_index;
    p.rows = rows;
    p.dim = dim;
    p.weight = weight;
    p.eps = c.rms_eps;
    p.y = b.xn;
    p.y_dtype = dt;
    p.y_stride = dim;
    return check_cuda(kcu::launch_rms_norm(p, s), "launch_rms_norm");
  };
  kcu::QkvRopeCacheLaunch post;  // RoPE, Q to the compute dtype, K and V into the cache
  post.qkv = b.qkv;
  post.row_stride = qkv_cols;
  post.rows = n;
  post.n_heads = c.n_heads;
  post.n_kv_heads = c.n_kv_heads;
  post.head_dim = c.head_dim;
  post.rope_dims = c.rope_dims > 0 ? c.rope_dims : c.head_dim;
  post.interleaved = c.rope_style == model::RopeStyle::interleaved;
  post.inv_freq = weights_.inv_freq;
  post.positions = positions;
  post.slots = slots;
  post.q_out = b.q;
  post.q_stride = q_dim;
  post.q_dtype = dt;
  kernels::PagedAttentionParams attn;
  attn.q = b.q;
  attn.out = b.att;
  attn.q_dtype = dt;
  attn.q_start = at<std::int32_t>(meta, layout.q_start);
  attn.context_tokens = at<std::int32_t>(meta, layout.context);
  attn.block_table = at<std::int32_t>(meta, layout.table);
  attn.max_blocks_per_seq = layout.table_stride;
  attn.num_seqs = layout.n_seqs;
  attn.n_heads = c.n_heads;
  attn.softmax_scale = 1.0f / std::sqrt(float(c.head_dim));

  // Tensor parallelism (model/tp_plan.hpp): row-parallel products land on x
  // with rank 0 adding and the others overwriting; the all-reduce sums them.
  model::Collective* const tp = options_.collective;
  const float residual_beta = tp == nullptr ? 1.0f : model::tp_residual_beta(options_.tp);
  auto all_reduce_x = [&]() -> Result<void> {
    if (tp == nullptr) return {};
    return tp->all_reduce_sum(b.x, std::size_t(n) * std::size_t(dim));
  };

  PENSIEVE_CUDA_TRY(kcu::launch_embedding(weights_.token_embedding, dt, dim,
                                          at<std::int32_t>(meta, layout.tokens), n, b.x, s));
  for (std::int32_t l = 0; l < c.n_layers; ++l) {
    const DeviceLayer& w = weights_.layers[std::size_t(l)];
    const kv::PagedKvView cache = pool.layer(l);
    if (auto ok = norm(w.attn_norm, nullptr, n); !ok) return ok;
    if (auto ok = gemm(b.xn, dim, w.w_qkv, n, qkv_cols, b.qkv, 0.0f); !ok) return ok;
    if (w.b_qkv != nullptr)
      PENSIEVE_CUDA_TRY(kcu::launch_add_bias(b.qkv, qkv_cols, n, qkv_cols, w.b_qkv, s));
    // The layer's swap-in lands before its KV is written or read (and no
    // earlier: layer l's copy overlaps layer l-1's compute).
    cudaError_t gate = cudaSuccess;
    gates_.before_layer(l, [&](const rt::Event& e) {
      if (e.device_event() == nullptr) {
        e.wait_blocking();  // a host event (no copy stream of ours): rare, correct
      } else {
        gate = cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(e.device_event()), 0);
      }
    });
    PENSIEVE_CUDA_TRY(gate);
    post.cache = cache;
    PENSIEVE_CUDA_TRY(kcu::launch_qkv_rope_cache(post, s));
    attn.kv = cache;
    PENSIEVE_CUDA_TRY(kcu::launch_paged_attention_items(attn, items, layout.n_items, partial, s));
    PENSIEVE_CUDA_TRY(kcu::launch_paged_attention_merge(attn, merges, layout.n_merges, partial, s));
    if (auto ok = gemm(b.att, q_dim, w.w_o, n, dim, b.x, residual_beta); !ok) return ok;  // x += o
    if (auto ok = all_reduce_x(); !ok) return ok;
    if (auto ok = norm(w.ffn_norm, nullptr, n); !ok) return ok;
    if (auto ok = gemm(b.xn, dim, w.w_gate_up, n, 2 * ff, b.gate_up, 0.0f); !ok) return ok;
    PENSIEVE_CUDA_TRY(kcu::launch_silu_mul(b.gate_up, b.gate_up + ff, 2 * ff, n, ff, b.h, dt, ff, s));
    if (auto ok = gemm(b.h, ff, w.w_down, n, dim, b.x, residual_beta); !ok) return ok;  // x += down
    if (auto ok = all_reduce_x(); !ok) return ok;
  }
  if (auto ok = norm(weights_.output_norm, at<std::int32_t>(meta, layout.logit_rows),
                     layout.n_logit_rows);
      !ok) {
    return ok;
  }
  if (tp == nullptr) return gemm(b.xn, dim, weights_.output, layout.n_logit_rows, c.vocab_size, b.logits, 0.0f);
  // This rank's vocabulary slice, every rank's gathered, laid out as whole rows.
  const model::TpRank rank = options_.tp;
  const std::int32_t rows = layout.n_logit_rows, slice = rank.vocab_slice(c.vocab_size);
  auto* own = static_cast<float*>(b.logits_slice.data());
  auto* all = static_cast<float*>(b.gathered.data());
  if (auto ok = gemm(b.xn, dim, weights_.output, rows, slice, own, 0.0f); !ok) return ok;
  if (auto ok = tp->all_gather(own, all, std::size_t(rows) * std::size_t(slice)); !ok) return ok;
  for (const model::TpLogitCopy& copy : model::tp_logit_copies(rank.ranks, c.vocab_size, rows)) {
    PENSIEVE_CUDA_TRY(cudaMemcpy2DAsync(b.logits + copy.dst_offset, copy.dst_pitch * sizeof(float),
                                        all + copy.src_offset, copy.src_pitch * sizeof(float),
                                        copy.width * sizeof(float), copy.rows, cudaMemcpyDeviceToDevice, s));
  }
  return {};
}

std::int32_t CudaForward::graph_splits(std::int32_t batch_size) const {
  // About two attention blocks per SM, at most 16 partial states per row.
  const std::int32_t blocks = batch_size * weights_.config.n_kv_heads;
  return std::clamp((2 * sm_count_ + blocks - 1) / blocks, 1, 16);
}

Result<bool> CudaForward::run_graph(const CudaKvPool& pool) {
  const auto batch_size = host_batch_.n_seqs();
  const kv::PagedKvView key = pool.layer(0);
  if (key.data != graph_pool_key_) {  // graphs write the pool they were captured with
    PENSIEVE_CUDA_TRY(cudaStreamSynchronize(stream_));
    graphs_.clear();
    warmed_.clear();
    graph_pool_key_ = key.data;
  }
  // KV cut at the CUDA attention kernel's 32-token tiles.
  host_batch_.plan = fixed_split_decode_plan(host_batch_.context, graph_splits(batch_size), 32);
  const BatchLayout layout = BatchLayout::of(host_batch_);
  auto found = graphs_.find(batch_size);
  if (found != graphs_.end()) {
    Graph& g = *found->second;
    if (g.exec == nullptr || !g.layout.same_shape(layout)) return false;
    if (auto ok = upload_batch(layout, static_cast<std::byte*>(g.meta.data())); !ok) return ok.error();
    PENSIEVE_CUDA_TRY(cudaGraphLaunch(g.exec, stream_));
    ++stats_.graph_replays;
    return true;
  }
  if (!warmed_[batch_size]) {  // first of its size: eager, with the graph's plan
    warmed_[batch_size] = true;
    if (auto ok = run_eager(pool); !ok) return ok.error();
    return true;
  }
  auto g = std::make_unique<Graph>();
  g->layout = layout;
  auto meta = MemoryBuffer::create(layout.bytes);
  if (!meta) return meta.error();
  g->meta = std::move(*meta);
  auto partial = MemoryBuffer::create(std::max<std::size_t>(
      16, host_batch_.plan.items.size() * std::size_t(weights_.config.n_heads) *
              std::size_t(weights_.config.head_dim + 2) * sizeof(float)));
  if (!partial) return partial.error();
  g->partial = std::move(*partial);
  if (auto ok = upload_batch(layout, static_cast<std::byte*>(g->meta.data())); !ok) return ok.error();
  // Relaxed: the launchers' cudaFuncSetAttribute and cuBLAS's queries are not stream work.
  PENSIEVE_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  auto captured = enqueue_pass(layout, static_cast<const std::byte*>(g->meta.data()),
                               static_cast<float*>(g->partial.data()), pool);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (captured && ended == cudaSuccess) {
    const cudaError_t made = cudaGraphInstantiate(&g->exec, graph, 0);
    if (made != cudaSuccess) {
      g->exec = nullptr;
      std::fprintf(stderr, "pensieve: %s\n", check_cuda(made, "cudaGraphInstantiate").error().message.c_str());
    }
  } else {
    std::fprintf(stderr, "pensieve: decode graph capture for batch %d failed: %s\n", int(batch_size),
                 captured ? check_cuda(ended, "cudaStreamEndCapture").error().message.c_str()
                          : captured.error().message.c_str());
  }
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // a failed capture leaves no sticky error; clear the last one
  Graph& stored = *graphs_.emplace(batch_size, std::move(g)).first->second;
  if (stored.exec == nullptr) {
    // The staged inputs were copied to the graph's buffer; run eagerly from there.
    ++stats_.eager_runs;
    if (auto ok = enqueue_pass(layout, static_cast<const std::byte*>(stored.meta.data()),
                               static_cast<float*>(stored.partial.data()), pool);
        !ok) {
      return ok.error();
    }
    return true;
  }
  ++stats_.graph_captures;
  PENSIEVE_CUDA_TRY(cudaGraphLaunch(stored.exec, stream_));
  ++stats_.graph_replays;
  return true;
}

}  // namespace pensieve::backend::cuda
