#include "gpu/model/test_model.hpp"

#include "gpu/model/builtin_vocab.hpp"
#include "gpu/formats/gguf_file.hpp"
#include "gpu/formats/gguf_writer.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/formats/half.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <system_error>

#include <unistd.h>

namespace pensieve::model {

TestModelRng::TestModelRng(std::uint64_t seed) : engine_(seed) {}

double TestModelRng::uniform() { return double(engine_() >> 11) * 0x1.0p-53; }

double TestModelRng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(angle);
  has_spare_ = true;
  return r * std::cos(angle);
}

std::vector<std::byte> quantize_q8_0(const float* x, std::int64_t n) {
  constexpr std::int64_t block = 32;
  std::vector<std::byte> out(std::size_t(n / block) * 34);
  for (std::int64_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    float amax = 0.0f;
    for (std::int64_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::byte* yb = out.data() + b * 34;
    const std::uint16_t dh = f32_to_f16(d);
    std::memcpy(yb, &dh, 2);
    for (std::int64_t j = 0; j < block; ++j) {
      const auto q = std::int8_t(std::lround(xb[j] * id));
      std::memcpy(yb + 2 + j, &q, 1);
    }
  }
  return out;
}

void dequantize_q8_0(const std::byte* blocks, std::int64_t n, float* out) {
  for (std::int64_t b = 0; b < n / 32; ++b) {
    const std::byte* xb = blocks + b * 34;
    std::uint16_t dh;
    std::memcpy(&dh, xb, 2);
    const float d = f16_to_f32(dh);
    for (std::int64_t j = 0; j < 32; ++j) {
      std::int8_t q;
      std::memcpy(&q, xb + 2 + j, 1);
      out[b * 32 + j] = float(q) * d;
    }
  }
}

namespace {

std::vector<std::byte> encode(const std::vector<float>& x, DType dtype) {
  if (dtype == DType::q8_0) return quantize_q8_0(x.data(), std::int64_t(x.size()));
  if (dtype == DType::f32) {
    std::vector<std::byte> out(x.size() * 4);
    std::memcpy(out.data(), x.data(), out.size());
    return out;
  }
  std::vector<std::byte> out(x.size() * 2);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint16_t h = dtype == DType::f16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

// A {rows, cols} matrix of N(0,1) * gain / sqrt(cols) (cols = fan-in), the
// scaling of ../shared/golden/README-gguf.md: with plain 1/sqrt(fan_in) the
// tied embedding dominates and the logits barely depend on the context.
std::vector<float> random_matrix(TestModelRng& rng, std::int64_t rows, std::int64_t cols, double gain) {
  std::vector<float> x(std::size_t(rows * cols));
  const double scale = gain / std::sqrt(double(cols));
  for (auto& v : x) v = float(rng.normal() * scale);
  return x;
}

std::vector<float> random_embedding(TestModelRng& rng, std::int64_t vocab, std::int64_t dim) {
  std::vector<float> x(std::size_t(vocab * dim));
  for (std::int64_t r = 0; r < vocab; ++r) {
    const double row_gain = std::exp(0.3 * rng.normal());
    for (std::int64_t c = 0; c < dim; ++c) x[std::size_t(r * dim + c)] = float(rng.normal() * row_gain);
  }
  return x;
}

std::vector<float> random_norm(TestModelRng& rng, std::int64_t dim) {
  std::vector<float> x(static_cast<std::size_t>(dim));
  for (auto& v : x) v = float(0.5 + rng.uniform());
  return x;
}

Result<void> check_options(const TestModelOptions& o) {
  if (o.n_layers <= 0 || o.dim <= 0 || o.n_heads <= 0 || o.n_kv_heads <= 0 || o.ff_dim <= 0 ||
      o.max_context <= 0) {
    return fail("test model: every size must be positive");
  }
  if (o.dim % o.n_heads != 0) return fail("test model: dim must be a multiple of heads");
  if ((o.dim / o.n_heads) % 2 != 0) return fail("test model: head dim (dim / heads) must be even");
  if (o.n_heads % o.n_kv_heads != 0) return fail("test model: heads must be a multiple of kv-heads");
  if (o.dtype != DType::f32 && o.dtype != DType::f16 && o.dtype != DType::q8_0) {
    return fail("test model: dtype must be f32, f16 or q8_0");
  }
  if (o.dtype == DType::q8_0 && (o.dim % 32 != 0 || o.ff_dim % 32 != 0)) {
    return fail("test model: q8_0 needs dim and ff to be multiples of 32");
  }
  if (!o.vocab_from && o.vocab_size <= 0) return fail("test model: give a vocabulary GGUF or a vocab size");
  return {};
}

void write_config_keys(GgufWriter& w, const TestModelOptions& o, std::int32_t vocab) {
  const std::uint32_t file_type = o.dtype == DType::f32 ? 0 : o.dtype == DType::f16 ? 1 : 7;
  w.set("general.architecture", GgufValue::of_string("llama"));
  w.set("general.name", GgufValue::of_string(o.name));
  w.set("general.description",
        GgufValue::of_string("random weights, not a trained model (pensieve-model make-test-model, seed " +
                             std::to_string(o.seed) + ")"));
  w.set("general.file_type", GgufValue::of_u32(file_type));
  w.set("llama.vocab_size", GgufValue::of_u32(std::uint32_t(vocab)));
  w.set("llama.context_length", GgufValue::of_u32(std::uint32_t(o.max_context)));
  w.set("llama.embedding_length", GgufValue::of_u32(std::uint32_t(o.dim)));
  w.set("llama.block_count", GgufValue::of_u32(std::uint32_t(o.n_layers)));
  w.set("llama.feed_forward_length", GgufValue::of_u32(std::uint32_t(o.ff_dim)));
  w.set("llama.attention.head_count", GgufValue::of_u32(std::uint32_t(o.n_heads)));
  w.set("llama.attention.head_count_kv", GgufValue::of_u32(std::uint32_t(o.n_kv_heads)));
  w.set("llama.rope.dimension_count", GgufValue::of_u32(std::uint32_t(o.dim / o.n_heads)));
  w.set("llama.rope.freq_base", GgufValue::of_f32(o.rope_theta));
  w.set("llama.attention.layer_norm_rms_epsilon", GgufValue::of_f32(o.rms_eps));
}

// Copies tokenizer.* from the vocabulary file; returns its size.
Result<std::int32_t> copy_vocabulary(GgufWriter& w, const TestModelOptions& o) {
  if (!o.vocab_from) return o.vocab_size;
  auto vocab = read_gguf(*o.vocab_from);
  if (!vocab) return vocab.error();
  const GgufValue* tokens = vocab->find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufType::array || tokens->count == 0 || tokens->count > INT32_MAX) {
    return fail(o.vocab_from->string() + ": has no tokenizer.ggml.tokens to copy");
  }
  for (const auto& [key, value] : vocab->metadata) {
    if (key.starts_with("tokenizer.")) w.set(key, value);
  }
  return std::int32_t(tokens->count);
}

Result<void> add(GgufWriter& w, const std::string& name, DType dtype, std::int64_t rows, std::int64_t cols,
                 const std::vector<float>& x) {
  std::vector<std::int64_t> ne = rows == 1 ? std::vector<std::int64_t>{cols} : std::vector<std::int64_t>{cols, rows};
  return w.add_tensor(name, dtype, std::move(ne), encode(x, dtype));
}

Result<void> add_layer(GgufWriter& w, TestModelRng& rng, const TestModelOptions& o, std::int32_t l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const std::int64_t dim = o.dim, head = o.dim / o.n_heads, q = head * o.n_heads, kv = head * o.n_kv_heads;
  const std::int64_t ff = o.ff_dim;
  const DType t = o.dtype;
  // Order and gains match llama.cpp's tensor order and README-gguf.md's recipe.
  if (auto ok = add(w, p + "attn_norm.weight", DType::f32, 1, dim, random_norm(rng, dim)); !ok) return ok;
  if (auto ok = add(w, p + "attn_q.weight", t, q, dim, random_matrix(rng, q, dim, 2.0)); !ok) return ok;
  if (auto ok = add(w, p + "attn_k.weight", t, kv, dim, random_matrix(rng, kv, dim, 2.0)); !ok) return ok;
  if (auto ok = add(w, p + "attn_v.weight", t, kv, dim, random_matrix(rng, kv, dim, 2.0)); !ok) return ok;
  if (auto ok = add(w, p + "attn_output.weight", t, dim, q, random_matrix(rng, dim, q, 8.0)); !ok) return ok;
  if (auto ok = add(w, p + "ffn_norm.weight", DType::f32, 1, dim, random_norm(rng, dim)); !ok) return ok;
  if (auto ok = add(w, p + "ffn_gate.weight", t, ff, dim, random_matrix(rng, ff, dim, 2.0)); !ok) return ok;
  if (auto ok = add(w, p + "ffn_down.weight", t, dim, ff, random_matrix(rng, dim, ff, 8.0)); !ok) return ok;
  return add(w, p + "ffn_up.weight", t, ff, dim, random_matrix(rng, ff, dim, 2.0));
}

}  // namespace

Result<void> make_test_model(const TestModelOptions& o, const std::filesystem::path& out) {
  if (auto ok = check_options(o); !ok) return ok;
  GgufWriter w;
  write_config_keys(w, o, o.vocab_size);
  auto vocab = copy_vocabulary(w, o);
  if (!vocab) return vocab.error();
  w.set("llama.vocab_size", GgufValue::of_u32(std::uint32_t(*vocab)));  // keeps its place
  if (o.chat_template) w.set("tokenizer.chat_template", GgufValue::of_string(*o.chat_template));
  TestModelRng rng(o.seed);
  if (auto ok = add(w, "token_embd.weight", o.dtype, *vocab, o.dim, random_embedding(rng, *vocab, o.dim)); !ok) {
    return ok;
  }
  for (std::int32_t l = 0; l < o.n_layers; ++l) {
    if (auto ok = add_layer(w, rng, o, l); !ok) return ok;
  }
  if (auto ok = add(w, "output_norm.weight", DType::f32, 1, o.dim, random_norm(rng, o.dim)); !ok) return ok;
  if (!o.tied_output) {
    auto head = random_matrix(rng, *vocab, o.dim, 8.0);
    if (auto ok = add(w, "output.weight", o.dtype, *vocab, o.dim, head); !ok) return ok;
  }
  return w.write(out);
}

Result<ModelWeights> generate_test_model(TestModelOptions options) {
  namespace fs = std::filesystem;
  static std::atomic<int> counter{0};
  const fs::path dir =
      fs::temp_directory_path() /
      ("pensieve-generated-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create " + dir.string() + ": " + ec.message());
  auto made = [&]() -> Result<ModelWeights> {
    if (!options.vocab_from) {
      if (auto r = write_builtin_vocab_gguf(dir / "vocab.gguf"); !r) return r.error();
      options.vocab_from = dir / "vocab.gguf";
    }
    if (auto r = make_test_model(options, dir / "model.gguf"); !r) return r.error();
    return load_model(dir / "model.gguf");
  }();
  fs::remove_all(dir, ec);  // best effort: a leftover temp folder is not an error
  return made;
}

}  // namespace pensieve::model
