#include "gpu/model/llama2c_loader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace pensieve::model {

namespace {

constexpr std::size_t header_bytes = 7 * sizeof(std::int32_t);
// Far beyond any real checkpoint, small enough that sizes cannot overflow.
constexpr std::int64_t max_dim = 1 << 16, max_layers = 1 << 10, max_vocab = 1 << 22,
                       max_seq = 1 << 22;

// Hands out consecutive F32 tensors from the weight area, bounds-checked.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, std::size_t offset) : bytes_(bytes), offset_(offset) {}
  Tensor take(std::string name, std::vector<std::int64_t> shape) {
    Tensor t;
    t.name = std::move(name);
    t.dtype = DType::f32;
    t.shape = std::move(shape);
    t.size_bytes = std::size_t(t.numel()) * sizeof(float);
    t.data = bytes_.data() + offset_;
    offset_ += t.size_bytes;
    return t;
  }
  void skip(std::size_t n_floats) { offset_ += n_floats * sizeof(float); }
  std::size_t offset() const { return offset_; }

 private:
  std::span<const std::byte> bytes_;
  std::size_t offset_;
};

Result<ModelConfig> read_header(std::span<const std::byte> bytes, const std::string& name) {
  if (bytes.size() < header_bytes) {
    return fail(name + ": truncated llama2.c checkpoint: " + std::to_string(bytes.size()) +
                " bytes, the header alone needs 28");
  }
  std::array<std::int32_t, 7> h;
  std::memcpy(h.data(), bytes.data(), header_bytes);
  if (std::uint32_t(h[0]) == 0x616b3432u) {
    return fail(name + ": llama2.c versioned export (magic \"ak42\") is not supported; "
                       "use the legacy format");
  }
  const auto [dim, hidden, layers, heads, kv_heads, vocab, seq] = h;
  const std::int64_t abs_vocab = vocab < 0 ? -std::int64_t(vocab) : vocab;
  if (dim <= 0 || dim > max_dim || hidden <= 0 || hidden > 4 * max_dim || layers <= 0 ||
      layers > max_layers || heads <= 0 || kv_heads <= 0 || abs_vocab == 0 || abs_vocab > max_vocab ||
      seq <= 0 || seq > max_seq) {
    return fail(name + ": llama2.c header has an absurd size (dim " + std::to_string(dim) +
                ", hidden " + std::to_string(hidden) + ", layers " + std::to_string(layers) +
                ", heads " + std::to_string(heads) + "/" + std::to_string(kv_heads) + ", vocab " +
                std::to_string(vocab) + ", seq_len " + std::to_string(seq) + ")");
  }
  if (dim % heads != 0 || heads % kv_heads != 0 || (dim / heads) % 2 != 0) {
    return fail(name + ": llama2.c header: dim " + std::to_string(dim) + " / heads " +
                std::to_string(heads) + " / kv heads " + std::to_string(kv_heads) +
                " do not divide into even heads");
  }
  ModelConfig c;
  c.architecture = "llama";
  c.name = name;
  c.n_layers = layers;
  c.dim = dim;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = dim / heads;
  c.ff_dim = hidden;
  c.vocab_size = std::int32_t(abs_vocab);
  c.max_context = seq;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.rope_dims = c.head_dim;
  c.rope_style = RopeStyle::interleaved;
  c.tied_output = vocab > 0;
  return c;
}

std::size_t expected_bytes(const ModelConfig& c) {
  const std::size_t d = std::size_t(c.dim), L = std::size_t(c.n_layers), kv = std::size_t(c.kv_dim()),
                    f = std::size_t(c.ff_dim), v = std::size_t(c.vocab_size);
  std::size_t floats = v * d + L * d + L * d * d + 2 * L * d * kv + L * d * d + L * d + 3 * L * f * d +
                       d + std::size_t(c.max_context) * std::size_t(c.head_dim);
  if (!c.tied_output) floats += v * d;
  return header_bytes + floats * sizeof(float);
}

}  // namespace

Result<ModelWeights> load_llama2c_bytes(std::span<const std::byte> bytes,
                                        std::shared_ptr<const void> storage,
                                        const std::string& name) {
  auto config = read_header(bytes, name);
  if (!config) return config.error();
  const ModelConfig& c = *config;
  const std::size_t need = expected_bytes(c);
  if (bytes.size() != need) {
    return fail(name + ": llama2.c checkpoint is " + std::to_string(bytes.size()) +
                " bytes, its header describes " + std::to_string(need) +
                (bytes.size() < need ? " (truncated)" : " (trailing bytes: not a legacy checkpoint?)"));
  }
  ModelWeights w;
  w.config = c;
  w.storage = std::move(storage);
  w.layers.resize(std::size_t(c.n_layers));
  const std::int64_t d = c.dim, q = c.q_dim(), kv = c.kv_dim(), f = c.ff_dim;
  Cursor at(bytes, header_bytes);
  w.token_embedding = at.take("tok_embeddings", {c.vocab_size, d});
  auto per_layer = [&](const char* what, std::vector<std::int64_t> shape, Tensor LayerWeights::*field) {
    for (std::int32_t l = 0; l < c.n_layers; ++l) {
      w.layers[std::size_t(l)].*field = at.take("layers." + std::to_string(l) + "." + what, shape);
    }
  };
  per_layer("attention_norm", {d}, &LayerWeights::attn_norm);
  per_layer("attention.wq", {q, d}, &LayerWeights::wq);
  per_layer("attention.wk", {kv, d}, &LayerWeights::wk);
  per_layer("attention.wv", {kv, d}, &LayerWeights::wv);
  per_layer("attention.wo", {d, q}, &LayerWeights::wo);
  per_layer("ffn_norm", {d}, &LayerWeights::ffn_norm);
  per_layer("feed_forward.w1", {f, d}, &LayerWeights::w_gate);
  per_layer("feed_forward.w2", {d, f}, &LayerWeights::w_down);
  per_layer("feed_forward.w3", {f, d}, &LayerWeights::w_up);
  w.output_norm = at.take("norm", {d});
  at.skip(std::size_t(c.max_context) * std::size_t(c.head_dim));  // freq_cis_real + imag
  w.output = c.tied_output ? w.token_embedding : at.take("output", {c.vocab_size, d});
  return w;
}

Result<ModelWeights> load_llama2c(const std::filesystem::path& path) {
  const std::string name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(name + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return fail(name + ": cannot stat: " + std::strerror(err));
  }
  const auto size = std::size_t(st.st_size);
  if (size < header_bytes) {
    ::close(fd);
    return fail(name + ": truncated llama2.c checkpoint: " + std::to_string(size) +
                " bytes, the header alone needs 28");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return fail(name + ": cannot mmap: " + std::strerror(map_err));
  std::shared_ptr<const void> storage(map, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  return load_llama2c_bytes({static_cast<const std::byte*>(map), size}, std::move(storage), name);
}

}  // namespace pensieve::model
