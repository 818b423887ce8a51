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
#include <initializer_list>
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

// What an --arch name means for the file.
struct Recipe {
  std::string gguf_arch;  // general.architecture and the key prefix
  std::int32_t head_dim = 0;
  bool tied = true;
  bool llama3_rope_freqs = false;
  bool phi3 = false;  // fused tensors, longrope factors
  bool qk_norm = false;
  bool post_norms = false;
  bool gemma = false;
  std::int32_t window = 0;
};

Result<Recipe> recipe_of(const TestModelOptions& o) {
  Recipe r;
  const std::string& a = o.arch;
  r.head_dim = o.head_dim > 0 ? o.head_dim : (o.n_heads > 0 ? o.dim / o.n_heads : 0);
  r.tied = o.tied_output;
  if (a == "llama") {
    r.gguf_arch = "llama";
  } else if (a == "llama3" || a == "llama3.2") {
    r.gguf_arch = "llama";
    r.llama3_rope_freqs = true;
    r.tied = a == "llama3.2";
  } else if (a == "mistral") {
    r.gguf_arch = "llama";
    r.window = 8;
  } else if (a == "qwen3") {
    r.gguf_arch = "qwen3";
    r.qk_norm = true;
  } else if (a == "phi3") {
    r.gguf_arch = "phi3";
    r.phi3 = true;
    r.tied = false;  // llama.cpp's phi3 requires output.weight
    r.window = 8;
  } else if (a == "gemma2" || a == "gemma3") {
    r.gguf_arch = a;
    r.gemma = true;
    r.post_norms = true;
    r.qk_norm = a == "gemma3";
    r.tied = true;  // llama.cpp's gemma always reads the embedding as the head
    r.window = 8;
  } else {
    return fail("test model: unknown --arch '" + a + "' (" + test_model_architectures + ")");
  }
  if (o.sliding_window > 0 && r.gguf_arch == "qwen3") {
    return fail("test model: --arch qwen3 has no sliding window");
  }
  if (o.sliding_window >= 0) r.window = o.sliding_window;
  return r;
}

Result<void> check_options(const TestModelOptions& o, const Recipe& r) {
  if (o.n_layers <= 0 || o.dim <= 0 || o.n_heads <= 0 || o.n_kv_heads <= 0 || o.ff_dim <= 0 ||
      o.max_context <= 0) {
    return fail("test model: every size must be positive");
  }
  if (o.head_dim == 0 && o.dim % o.n_heads != 0) return fail("test model: dim must be a multiple of heads");
  if (r.head_dim % 2 != 0 || r.head_dim <= 0) return fail("test model: head dim (dim / heads) must be even");
  if (o.n_heads % o.n_kv_heads != 0) return fail("test model: heads must be a multiple of kv-heads");
  if (o.dtype != DType::f32 && o.dtype != DType::f16 && o.dtype != DType::q8_0) {
    return fail("test model: dtype must be f32, f16 or q8_0");
  }
  if (o.dtype == DType::q8_0 && (o.dim % 32 != 0 || o.ff_dim % 32 != 0)) {
    return fail("test model: q8_0 needs dim and ff to be multiples of 32");
  }
  if (o.dtype == DType::q8_0 && (r.head_dim * o.n_heads) % 32 != 0) {
    return fail("test model: q8_0 needs heads * head dim to be a multiple of 32");
  }
  if (r.phi3 && r.head_dim * o.n_heads != o.dim) return fail("test model: phi3 needs head dim * heads = dim");
  if (!o.vocab_from && o.vocab_size <= 0) return fail("test model: give a vocabulary GGUF or a vocab size");
  return {};
}

void write_config_keys(GgufWriter& w, const TestModelOptions& o, const Recipe& r, std::int32_t vocab) {
  const std::uint32_t file_type = o.dtype == DType::f32 ? 0 : o.dtype == DType::f16 ? 1 : 7;
  const std::string a = r.gguf_arch + ".";
  w.set("general.architecture", GgufValue::of_string(r.gguf_arch));
  w.set("general.name", GgufValue::of_string(o.name));
  w.set("general.description",
        GgufValue::of_string("random weights, not a trained model (pensieve-model make-test-model" +
                             (o.arch == "llama" ? std::string() : " --arch " + o.arch) + ", seed " + std::to_string(o.seed) + ")"));
  w.set("general.file_type", GgufValue::of_u32(file_type));
  w.set(a + "vocab_size", GgufValue::of_u32(std::uint32_t(vocab)));
  w.set(a + "context_length", GgufValue::of_u32(std::uint32_t(o.max_context)));
  w.set(a + "embedding_length", GgufValue::of_u32(std::uint32_t(o.dim)));
  w.set(a + "block_count", GgufValue::of_u32(std::uint32_t(o.n_layers)));
  w.set(a + "feed_forward_length", GgufValue::of_u32(std::uint32_t(o.ff_dim)));
  w.set(a + "attention.head_count", GgufValue::of_u32(std::uint32_t(o.n_heads)));
  w.set(a + "attention.head_count_kv", GgufValue::of_u32(std::uint32_t(o.n_kv_heads)));
  if (r.qk_norm || r.gemma || o.head_dim > 0) {
    w.set(a + "attention.key_length", GgufValue::of_u32(std::uint32_t(r.head_dim)));
    w.set(a + "attention.value_length", GgufValue::of_u32(std::uint32_t(r.head_dim)));
  }
  w.set(a + "rope.dimension_count", GgufValue::of_u32(std::uint32_t(r.head_dim)));
  w.set(a + "rope.freq_base", GgufValue::of_f32(o.rope_theta));
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::of_f32(o.rms_eps));
  if (r.window > 0 || r.phi3) w.set(a + "attention.sliding_window", GgufValue::of_u32(std::uint32_t(r.window)));
  if (r.phi3) {
    // A 4x context extension, as Phi-3-mini-128k's longrope (attn_factor as
    // llama.cpp's converter computes it); the long factors apply.
    const std::int32_t original = std::max(1, o.max_context / 4);
    w.set(a + "rope.scaling.original_context_length", GgufValue::of_u32(std::uint32_t(original)));
    const double scale = double(o.max_context) / double(original);
    const double factor = original > 1 ? std::sqrt(1.0 + std::log(scale) / std::log(double(original))) : 1.0;
    w.set(a + "rope.scaling.attn_factor", GgufValue::of_f32(float(factor)));
  }
  if (r.gguf_arch == "gemma2") {
    w.set(a + "attn_logit_softcapping", GgufValue::of_f32(o.attn_softcap >= 0.0f ? o.attn_softcap : 50.0f));
    w.set(a + "final_logit_softcapping", GgufValue::of_f32(o.final_softcap >= 0.0f ? o.final_softcap : 30.0f));
  }
  if (r.gguf_arch == "gemma3") {
    // Gemma 3 4B and up: the global layers' rope is scaled linearly by 8.
    w.set(a + "rope.scaling.type", GgufValue::of_string("linear"));
    w.set(a + "rope.scaling.factor", GgufValue::of_f32(8.0f));
  }
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

std::vector<float> concat(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<float> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

Result<void> add_layer(GgufWriter& w, TestModelRng& rng, const TestModelOptions& o, const Recipe& r,
                       std::int32_t l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const std::int64_t dim = o.dim, head = r.head_dim, q = head * o.n_heads, kv = head * o.n_kv_heads;
  const std::int64_t ff = o.ff_dim;
  const DType t = o.dtype;
  // Order and gains match llama.cpp's tensor order and README-gguf.md's
  // recipe; the other architectures draw the same values in the same order,
  // then their own tensors.
  const auto attn_norm = random_norm(rng, dim);
  const auto wq = random_matrix(rng, q, dim, 2.0), wk = random_matrix(rng, kv, dim, 2.0),
             wv = random_matrix(rng, kv, dim, 2.0), wo = random_matrix(rng, dim, q, 8.0);
  const auto ffn_norm = random_norm(rng, dim);
  const auto gate = random_matrix(rng, ff, dim, 2.0), down = random_matrix(rng, dim, ff, 8.0),
             up = random_matrix(rng, ff, dim, 2.0);
  if (auto ok = add(w, p + "attn_norm.weight", DType::f32, 1, dim, attn_norm); !ok) return ok;
  if (r.phi3) {
    if (auto ok = add(w, p + "attn_qkv.weight", t, q + 2 * kv, dim, concat({&wq, &wk, &wv})); !ok) return ok;
  } else {
    if (auto ok = add(w, p + "attn_q.weight", t, q, dim, wq); !ok) return ok;
    if (auto ok = add(w, p + "attn_k.weight", t, kv, dim, wk); !ok) return ok;
    if (auto ok = add(w, p + "attn_v.weight", t, kv, dim, wv); !ok) return ok;
  }
  if (auto ok = add(w, p + "attn_output.weight", t, dim, q, wo); !ok) return ok;
  if (auto ok = add(w, p + "ffn_norm.weight", DType::f32, 1, dim, ffn_norm); !ok) return ok;
  if (r.phi3) {
    if (auto ok = add(w, p + "ffn_down.weight", t, dim, ff, down); !ok) return ok;
    if (auto ok = add(w, p + "ffn_up.weight", t, 2 * ff, dim, concat({&gate, &up})); !ok) return ok;
  } else {
    if (auto ok = add(w, p + "ffn_gate.weight", t, ff, dim, gate); !ok) return ok;
    if (auto ok = add(w, p + "ffn_down.weight", t, dim, ff, down); !ok) return ok;
    if (auto ok = add(w, p + "ffn_up.weight", t, ff, dim, up); !ok) return ok;
  }
  if (r.qk_norm) {
    if (auto ok = add(w, p + "attn_q_norm.weight", DType::f32, 1, head, random_norm(rng, head)); !ok) return ok;
    if (auto ok = add(w, p + "attn_k_norm.weight", DType::f32, 1, head, random_norm(rng, head)); !ok) return ok;
  }
  if (r.post_norms) {
    if (auto ok = add(w, p + "post_attention_norm.weight", DType::f32, 1, dim, random_norm(rng, dim)); !ok) return ok;
    if (auto ok = add(w, p + "post_ffw_norm.weight", DType::f32, 1, dim, random_norm(rng, dim)); !ok) return ok;
  }
  return {};
}

// Llama 3.1's rope_freqs as llama.cpp's converter computes them (factor 8,
// low 1, high 4, original context 8192).
std::vector<float> llama3_rope_freqs(std::int64_t head_dim, float theta) {
  constexpr double factor = 8.0, low = 1.0, high = 4.0, original = 8192.0;
  std::vector<float> out;
  for (std::int64_t i = 0; i < head_dim; i += 2) {
    const float freq = 1.0f / std::pow(theta, float(i) / float(head_dim));
    const double wavelen = 2.0 * std::numbers::pi / double(freq);
    if (wavelen < original / high) {
      out.push_back(1.0f);
    } else if (wavelen > original / low) {
      out.push_back(float(factor));
    } else {
      const double smooth = (original / wavelen - low) / (high - low);
      out.push_back(float(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return out;
}

Result<void> add_rope_tensors(GgufWriter& w, TestModelRng& rng, const Recipe& r, float theta) {
  if (r.llama3_rope_freqs) {
    const auto f = llama3_rope_freqs(r.head_dim, theta);
    return add(w, "rope_freqs.weight", DType::f32, 1, std::int64_t(f.size()), f);
  }
  if (!r.phi3) return {};
  std::vector<float> long_f(std::size_t(r.head_dim / 2)), short_f(long_f.size());
  for (auto& x : long_f) x = float(1.0 + 7.0 * rng.uniform());
  for (auto& x : short_f) x = float(1.0 + 0.2 * rng.uniform());
  if (auto ok = add(w, "rope_factors_long.weight", DType::f32, 1, std::int64_t(long_f.size()), long_f); !ok) return ok;
  return add(w, "rope_factors_short.weight", DType::f32, 1, std::int64_t(short_f.size()), short_f);
}

}  // namespace

Result<void> make_test_model(const TestModelOptions& o, const std::filesystem::path& out) {
  auto recipe = recipe_of(o);
  if (!recipe) return recipe.error();
  const Recipe& r = *recipe;
  if (auto ok = check_options(o, r); !ok) return ok;
  GgufWriter w;
  write_config_keys(w, o, r, o.vocab_size);
  auto vocab = copy_vocabulary(w, o);
  if (!vocab) return vocab.error();
  w.set(r.gguf_arch + ".vocab_size", GgufValue::of_u32(std::uint32_t(*vocab)));  // keeps its place
  if (o.chat_template) w.set("tokenizer.chat_template", GgufValue::of_string(*o.chat_template));
  TestModelRng rng(o.seed);
  if (auto ok = add(w, "token_embd.weight", o.dtype, *vocab, o.dim, random_embedding(rng, *vocab, o.dim)); !ok) {
    return ok;
  }
  for (std::int32_t l = 0; l < o.n_layers; ++l) {
    if (auto ok = add_layer(w, rng, o, r, l); !ok) return ok;
  }
  if (auto ok = add(w, "output_norm.weight", DType::f32, 1, o.dim, random_norm(rng, o.dim)); !ok) return ok;
  if (auto ok = add_rope_tensors(w, rng, r, o.rope_theta); !ok) return ok;
  if (!r.tied) {
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
