#include "gpu/model/tp_shard.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace pensieve::model {

namespace {

// The shard's copied column slices, and the full model's storage the row
// slices point into.
struct ShardStorage {
  std::shared_ptr<const void> full;
  std::vector<std::unique_ptr<std::byte[]>> copies;
};

std::string rank_name(TpRank tp) {
  return "rank " + std::to_string(tp.rank) + " of " + std::to_string(tp.ranks);
}

// Rows [begin, begin + count) of a matrix: a view, no copy.
Tensor row_slice(const Tensor& t, std::int64_t begin, std::int64_t count) {
  const std::size_t row_bytes = dtype_row_bytes(t.dtype, t.cols());
  Tensor s = t;
  s.shape = {count, t.cols()};
  s.data = t.data + std::size_t(begin) * row_bytes;
  s.size_bytes = std::size_t(count) * row_bytes;
  return s;
}

// Elements [begin, begin + count) of a vector ({n} or {1, n}): a view.
Tensor vector_slice(const Tensor& t, std::int64_t begin, std::int64_t count) {
  Tensor s = t;
  s.shape = {count};
  s.data = t.data + dtype_row_bytes(t.dtype, begin);
  s.size_bytes = dtype_row_bytes(t.dtype, count);
  return s;
}

// Columns [begin, begin + count) of every row: a copy kept in `storage`.
Result<Tensor> column_slice(const Tensor& t, const char* what, std::int64_t begin, std::int64_t count,
                            ShardStorage& storage) {
  const std::int64_t block = dtype_block_elems(t.dtype);
  if (begin % block != 0 || count % block != 0) {
    return fail(std::string(what) + " (" + dtype_name(t.dtype) + ") cannot be split at column " +
                std::to_string(begin) + ": a slice must be whole blocks of " + std::to_string(block));
  }
  const std::size_t src_row = dtype_row_bytes(t.dtype, t.cols());
  const std::size_t offset = dtype_row_bytes(t.dtype, begin), dst_row = dtype_row_bytes(t.dtype, count);
  auto bytes = std::make_unique<std::byte[]>(dst_row * std::size_t(t.rows()));
  for (std::int64_t r = 0; r < t.rows(); ++r) {
    std::memcpy(bytes.get() + std::size_t(r) * dst_row, t.data + std::size_t(r) * src_row + offset, dst_row);
  }
  Tensor s = t;
  s.shape = {t.rows(), count};
  s.data = bytes.get();
  s.size_bytes = dst_row * std::size_t(t.rows());
  storage.copies.push_back(std::move(bytes));
  return s;
}

Result<void> check_matrix(const Tensor& t, const char* what, std::int64_t rows, std::int64_t cols) {
  if (!t.present() || t.shape.size() != 2 || t.rows() != rows || t.cols() != cols) {
    return fail(std::string("cannot shard ") + what + ": it is missing or not {" + std::to_string(rows) +
                ", " + std::to_string(cols) + "}");
  }
  return {};
}

Result<LayerWeights> shard_layer(const LayerWeights& w, const ModelConfig& c, TpRank tp,
                                 ShardStorage& storage) {
  const std::int64_t n = tp.ranks, q = c.q_dim() / n, kv = c.kv_dim() / n, ff = c.ff_dim / n;
  const std::int64_t r = tp.rank;
  if (auto ok = check_matrix(w.wq, "wq", c.q_dim(), c.dim); !ok) return ok.error();
  if (auto ok = check_matrix(w.wk, "wk", c.kv_dim(), c.dim); !ok) return ok.error();
  if (auto ok = check_matrix(w.wv, "wv", c.kv_dim(), c.dim); !ok) return ok.error();
  if (auto ok = check_matrix(w.wo, "wo", c.dim, c.q_dim()); !ok) return ok.error();
  if (auto ok = check_matrix(w.w_gate, "w_gate", c.ff_dim, c.dim); !ok) return ok.error();
  if (auto ok = check_matrix(w.w_up, "w_up", c.ff_dim, c.dim); !ok) return ok.error();
  if (auto ok = check_matrix(w.w_down, "w_down", c.dim, c.ff_dim); !ok) return ok.error();
  LayerWeights s = w;
  s.wq = row_slice(w.wq, r * q, q);
  s.wk = row_slice(w.wk, r * kv, kv);
  s.wv = row_slice(w.wv, r * kv, kv);
  s.w_gate = row_slice(w.w_gate, r * ff, ff);
  s.w_up = row_slice(w.w_up, r * ff, ff);
  if (w.bq.present()) s.bq = vector_slice(w.bq, r * q, q);
  if (w.bk.present()) s.bk = vector_slice(w.bk, r * kv, kv);
  if (w.bv.present()) s.bv = vector_slice(w.bv, r * kv, kv);
  auto wo = column_slice(w.wo, "wo", r * q, q, storage);
  if (!wo) return wo.error();
  auto down = column_slice(w.w_down, "w_down", r * ff, ff, storage);
  if (!down) return down.error();
  s.wo = std::move(*wo);
  s.w_down = std::move(*down);
  return s;
}

}  // namespace

Result<void> check_tensor_parallel(const ModelConfig& c, std::int32_t ranks) {
  const std::string n = std::to_string(ranks);
  if (ranks < 1) return fail("tensor parallelism needs at least one rank, not " + n);
  if (c.n_heads % ranks != 0 || c.n_kv_heads % ranks != 0) {
    return fail("tensor parallelism over " + n + " ranks needs n_heads (" + std::to_string(c.n_heads) +
                ") and n_kv_heads (" + std::to_string(c.n_kv_heads) + ") to be multiples of " + n);
  }
  if (c.ff_dim % ranks != 0) {
    return fail("tensor parallelism over " + n + " ranks needs ff_dim (" + std::to_string(c.ff_dim) +
                ") to be a multiple of " + n);
  }
  const TpRank last{ranks - 1, ranks};
  if (last.vocab_rows(c.vocab_size) <= 0) {
    return fail("a vocabulary of " + std::to_string(c.vocab_size) + " tokens is too small to split " + n +
                " ways");
  }
  return {};
}

Result<ModelWeights> shard_weights(const ModelWeights& full, TpRank tp) {
  const ModelConfig& c = full.config;
  if (auto ok = check_tensor_parallel(c, tp.ranks); !ok) return ok.error();
  if (tp.rank < 0 || tp.rank >= tp.ranks) return fail("tensor-parallel " + rank_name(tp) + " is out of range");
  if (std::int32_t(full.layers.size()) != c.n_layers) return fail("cannot shard: the layer count differs from the config");
  if (!tp.sharded()) return full;
  auto storage = std::make_shared<ShardStorage>();
  storage->full = full.storage;
  ModelWeights s;
  s.config = c;
  s.config.n_heads = c.n_heads / tp.ranks;
  s.config.n_kv_heads = c.n_kv_heads / tp.ranks;
  s.config.ff_dim = c.ff_dim / tp.ranks;
  s.token_embedding = full.token_embedding;
  s.output_norm = full.output_norm;
  s.rope_freqs = full.rope_freqs;
  s.tokenizer = full.tokenizer;
  const Tensor& head = full.output.present() ? full.output : full.token_embedding;
  if (auto ok = check_matrix(head, "the output head", c.vocab_size, c.dim); !ok) return ok.error();
  s.output = row_slice(head, tp.vocab_begin(c.vocab_size), tp.vocab_rows(c.vocab_size));
  for (std::size_t l = 0; l < full.layers.size(); ++l) {
    auto layer = shard_layer(full.layers[l], c, tp, *storage);
    if (!layer) return fail("layer " + std::to_string(l) + ", " + rank_name(tp) + ": " + layer.error().message);
    s.layers.push_back(std::move(*layer));
  }
  s.storage = std::move(storage);
  return s;
}

}  // namespace pensieve::model
