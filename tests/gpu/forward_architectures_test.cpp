// The forward pass of every architecture on generated models: the paged
// pass (what the server runs) gives the contiguous reference's logits bit
// for bit; sliding windows are honoured (a token outside every window leaves
// the logits' bits alone, one inside changes them, Gemma's global layers see
// everything); soft-capping bounds the logits; the per-architecture weights
// and scalings (q/k norms, post-norms, embedding scaling, rope divisors) are
// used, so the output changes without them.
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kv/kv_cache.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/test_model.hpp"
#include "tests/gpu/quant_test_blocks.hpp"
#include "tests/result_checks.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace pensieve;
using namespace pensieve::model;

namespace {

TestModelOptions arch_options(const std::string& arch, std::int32_t layers = 2) {
  TestModelOptions o;
  o.arch = arch;
  o.n_layers = layers;
  o.dim = 64;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 96;
  o.max_context = 512;
  o.dtype = DType::f32;
  o.seed = 21;
  if (arch == "qwen3" || arch.starts_with("gemma")) o.head_dim = 32;
  if (arch.starts_with("llama3")) o.rope_theta = 500000.0f;
  if (arch == "gemma3" || arch == "qwen3") o.rope_theta = 1000000.0f;
  return o;
}

ModelWeights weights_of(const TestModelOptions& o) {
  auto w = generate_test_model(o);
  REQUIRE_OK(w);
  return std::move(*w);
}

CpuForward forward_of(ModelWeights w) {
  auto f = CpuForward::create(std::move(w), {.n_threads = 2, .min_parallel_cost = 0, .log_weight_placement = false});
  REQUIRE_OK(f);
  return std::move(*f);
}

std::vector<std::int32_t> prompt_of(std::size_t n, std::int32_t vocab, std::int32_t salt) {
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = std::int32_t((i * 37 + std::size_t(salt) * 11 + 5) % std::size_t(vocab));
  return t;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

std::int32_t argmax(std::span<const float> x) { return std::int32_t(std::max_element(x.begin(), x.end()) - x.begin()); }

// The last position's logits of a prompt, contiguous cache, one pass.
std::vector<float> last_logits(CpuForward& fwd, const std::vector<std::int32_t>& prompt) {
  ContiguousKvCache kv = fwd.make_kv_cache(std::int32_t(prompt.size()));
  ForwardSequence seq{prompt, 0, &kv, false};
  auto r = fwd.forward(std::span(&seq, 1));
  REQUIRE_OK(r);
  return {r->last(0).begin(), r->last(0).end()};
}

// Logits after the prompt and each of `steps` greedy steps, contiguous cache.
std::vector<std::vector<float>> contiguous_run(CpuForward& fwd, const std::vector<std::int32_t>& prompt, int steps) {
  ContiguousKvCache kv = fwd.make_kv_cache(std::int32_t(prompt.size()) + steps + 1);
  std::vector<std::vector<float>> out;
  ForwardSequence seq{prompt, 0, &kv, false};
  auto r = fwd.forward(std::span(&seq, 1));
  REQUIRE_OK(r);
  out.emplace_back(r->last(0).begin(), r->last(0).end());
  for (int s = 0; s < steps; ++s) {
    const std::int32_t next = argmax(out.back());
    ForwardSequence d{std::span(&next, 1), kv.size_tokens(), &kv, false};
    auto rd = fwd.forward(std::span(&d, 1));
    REQUIRE_OK(rd);
    out.emplace_back(rd->last(0).begin(), rd->last(0).end());
  }
  return out;
}

// The same over a paged pool of 4-token blocks handed out in a shuffled
// order, the prompt fed in 5-token chunks, two sequences in every batch.
std::vector<std::vector<std::vector<float>>> paged_run(CpuForward& fwd,
                                                       const std::vector<std::vector<std::int32_t>>& prompts,
                                                       int steps) {
  kv::KvCache cache(fwd.kv_pool_config(64, 4));
  auto ids = cache.allocator().allocate_n(64);
  REQUIRE(ids.has_value());
  for (std::size_t i = 0; i < ids->size(); ++i) cache.allocator().release((*ids)[(i * 29) % 64]);
  std::vector<kv::BlockTable> tables;
  for (std::size_t s = 0; s < prompts.size(); ++s) tables.push_back(cache.new_sequence());
  std::vector<std::int32_t> fed(prompts.size(), 0);
  std::vector<std::vector<std::vector<float>>> got(prompts.size());
  std::vector<std::vector<std::int32_t>> pending = prompts;
  for (int iteration = 0; iteration < 100; ++iteration) {
    std::vector<PagedSequence> batch;
    std::vector<std::size_t> who;
    std::vector<std::vector<std::int32_t>> chunks;
    chunks.reserve(prompts.size());
    for (std::size_t s = 0; s < prompts.size(); ++s) {
      if (pending[s].empty() || got[s].size() > std::size_t(steps)) continue;
      const std::size_t n = std::min<std::size_t>(5, pending[s].size());
      chunks.emplace_back(pending[s].begin(), pending[s].begin() + std::ptrdiff_t(n));
      pending[s].erase(pending[s].begin(), pending[s].begin() + std::ptrdiff_t(n));
      REQUIRE(cache.append(tables[s], std::int64_t(n)));
      batch.push_back({chunks.back(), fed[s], tables[s].blocks(), false});
      fed[s] += std::int32_t(n);
      who.push_back(s);
    }
    if (batch.empty()) break;
    auto r = fwd.forward_paged(batch, cache.pool());
    REQUIRE_OK(r);
    for (std::size_t b = 0; b < who.size(); ++b) {
      const std::size_t s = who[b];
      if (!pending[s].empty()) continue;
      auto row = r->last(b);
      got[s].emplace_back(row.begin(), row.end());
      pending[s] = {argmax(row)};
    }
  }
  return got;
}

const char* const all_archs[] = {"llama", "llama3", "llama3.2", "qwen3", "mistral", "phi3", "gemma2", "gemma3"};

}  // namespace

TEST_CASE("every architecture's paged forward gives the contiguous forward's logits bit for bit",
          "[forward][paged]") {
  for (const auto& [arch, dtype] : [] {
         std::vector<std::pair<std::string, DType>> v;
         for (const char* a : all_archs) {
           for (DType d : {DType::f32, DType::q8_0}) v.emplace_back(a, d);
         }
         return v;
       }()) {
    INFO("arch " << arch << " " << dtype_name(dtype));
    auto o = arch_options(arch, arch == "gemma3" ? 6 : 2);
    o.dtype = dtype;
    CpuForward fwd = forward_of(weights_of(o));
    const std::int32_t vocab = fwd.config().vocab_size;
    // Longer than the 8-token windows, and not a multiple of the block size.
    const std::vector<std::vector<std::int32_t>> prompts = {prompt_of(23, vocab, 1), prompt_of(6, vocab, 2)};
    const int steps = 5;
    const auto got = paged_run(fwd, prompts, steps);
    for (std::size_t s = 0; s < prompts.size(); ++s) {
      const auto want = contiguous_run(fwd, prompts[s], steps);
      REQUIRE(got[s].size() == want.size());
      for (std::size_t step = 0; step < want.size(); ++step) {
        INFO("sequence " << s << " step " << step << " max diff " << max_abs_diff(got[s][step], want[step]));
        CHECK(same_bits(got[s][step], want[step]));
        CHECK(argmax(got[s][step]) == argmax(want[step]));
      }
    }
  }
}

namespace {

// Nine prompts of 1-12 tokens (`salt` varies their ids) through paged_run
// together and each alone through contiguous_run: every step's logits have
// the same bits.
void check_batch_of_9_alone(CpuForward& fwd, std::int32_t salt) {
  const std::int32_t vocab = fwd.config().vocab_size;
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::size_t n : {1u, 3u, 7u, 12u, 5u, 9u, 2u, 11u, 6u})
    prompts.push_back(prompt_of(n, vocab, std::int32_t(n) + salt));
  const int steps = 4;
  const auto got = paged_run(fwd, prompts, steps);
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    const auto want = contiguous_run(fwd, prompts[s], steps);
    REQUIRE(got[s].size() == want.size());
    for (std::size_t step = 0; step < want.size(); ++step) {
      INFO("sequence " << s << " step " << step << " max diff "
                       << max_abs_diff(got[s][step], want[step]));
      CHECK(same_bits(got[s][step], want[step]));
    }
  }
}

}  // namespace

TEST_CASE(
    "a Q8_0 model's sequences in a paged batch of 9 (prompts fed in chunks) have their logits "
    "alone bit for bit",
    "[forward][paged][q8_0]") {
  // Decode batches of 9 and mixed ones of up to 45 rows take the Q8_0 token
  // tiles; alone, a prompt takes them in one pass and each step the
  // one-token tile.
  auto o = arch_options("llama");
  o.dtype = DType::q8_0;
  CpuForward fwd = forward_of(weights_of(o));
  check_batch_of_9_alone(fwd, 3);
}

namespace {

// A 256-wide llama whose layer matrices are IQ4_XS (as in llama-quantize's
// IQ4_XS mix), rounded from the generated F32 weights, and the same model
// with those blocks dequantised back to F32.
struct Iq4XsModels {
  ModelWeights iq4_xs, dequantised;
};
Iq4XsModels iq4_xs_models() {
  auto o = arch_options("llama");
  o.dim = 256;
  o.ff_dim = 512;
  ModelWeights w = weights_of(o);
  ModelWeights deq = w;
  auto blocks = std::make_shared<std::vector<std::vector<std::byte>>>();
  auto floats = std::make_shared<std::vector<std::vector<float>>>();
  blocks->reserve(7 * w.layers.size());
  floats->reserve(7 * w.layers.size());
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    for (Tensor LayerWeights::*m :
         {&LayerWeights::wq, &LayerWeights::wk, &LayerWeights::wv, &LayerWeights::wo,
          &LayerWeights::w_gate, &LayerWeights::w_up, &LayerWeights::w_down}) {
      Tensor& t = w.layers[l].*m;
      REQUIRE(t.dtype == DType::f32);
      blocks->push_back(
          testing::iq4_xs_blocks_of(reinterpret_cast<const float*>(t.data), t.rows(), t.cols()));
      floats->emplace_back(std::size_t(t.numel()));
      kernels::cpu::dequantize_row(DType::iq4_xs, blocks->back().data(), t.numel(),
                                   floats->back().data());
      Tensor& d = deq.layers[l].*m;
      d.data = reinterpret_cast<const std::byte*>(floats->back().data());
      t.dtype = DType::iq4_xs;
      t.data = blocks->back().data();
      t.size_bytes = blocks->back().size();
    }
  }
  // Each keeps the generated storage (its vectors) and the new matrices.
  w.storage = std::make_shared<std::tuple<std::shared_ptr<const void>, decltype(blocks)>>(w.storage,
                                                                                          blocks);
  deq.storage = std::make_shared<std::tuple<std::shared_ptr<const void>, decltype(floats)>>(
      deq.storage, floats);
  return {std::move(w), std::move(deq)};
}

}  // namespace

TEST_CASE(
    "an IQ4_XS model's sequences in a paged batch of 9 have their logits alone bit for bit, and "
    "with float activations it is its dequantised F32 model",
    "[forward][paged][iq4_xs]") {
  Iq4XsModels models = iq4_xs_models();
  CpuForward deq = forward_of(std::move(models.dequantised));
  ModelWeights float_copy = models.iq4_xs;
  CpuForward fwd = forward_of(std::move(models.iq4_xs));
  auto float_fwd = CpuForward::create(std::move(float_copy), {.n_threads = 2,
                                                              .float_activations = true,
                                                              .min_parallel_cost = 0,
                                                              .log_weight_placement = false});
  REQUIRE_OK(float_fwd);
  // Batches of up to 8 rows take the lane tiles, of 9 to 45 the lane panels;
  // alone, a step takes the lane tile or the 8-row tile (the CPU's tuning).
  check_batch_of_9_alone(fwd, 5);
  const std::int32_t vocab = fwd.config().vocab_size;
  // The float-activation pass dequantises each row to the F32 values the
  // dequantised model holds and runs the same F32 kernels on them.
  const auto prompt = prompt_of(10, vocab, 2);
  const auto f = last_logits(*float_fwd, prompt);
  CHECK(same_bits(f, last_logits(deq, prompt)));
  // ggml's rounding of the activations (Q8_K blocks) moves the logits a
  // little from the float pass, not to another model.
  const auto q = last_logits(fwd, prompt);
  float spread = 0;
  for (float v : f) spread = std::max(spread, std::abs(v));
  INFO("max diff " << max_abs_diff(q, f) << " largest logit " << spread);
  CHECK(max_abs_diff(q, f) > 0.0f);
  CHECK(max_abs_diff(q, f) < 0.1f * spread);
}

TEST_CASE("a windowed layer ignores tokens outside its window and sees those inside", "[forward]") {
  for (const char* arch : {"mistral", "phi3", "gemma2", "gemma3"}) {
    INFO("arch " << arch);
    // One layer: windowed in every one of these architectures.
    CpuForward fwd = forward_of(weights_of(arch_options(arch, 1)));
    REQUIRE(fwd.config().layer_window(0) == 8);
    const std::int32_t vocab = fwd.config().vocab_size;
    const auto prompt = prompt_of(20, vocab, 3);  // the last position, 19, sees 12..19
    const auto base = last_logits(fwd, prompt);
    auto outside = prompt, inside = prompt;
    outside[11] = (outside[11] + 1) % vocab;
    inside[12] = (inside[12] + 1) % vocab;
    CHECK(same_bits(last_logits(fwd, outside), base));
    CHECK(max_abs_diff(last_logits(fwd, inside), base) > 1e-4f);
  }
  // Without a window the same change outside it is seen.
  auto o = arch_options("mistral", 1);
  o.sliding_window = 0;
  CpuForward plain = forward_of(weights_of(o));
  const auto prompt = prompt_of(20, plain.config().vocab_size, 3);
  auto outside = prompt;
  outside[11] = (outside[11] + 1) % plain.config().vocab_size;
  CHECK(max_abs_diff(last_logits(plain, outside), last_logits(plain, prompt)) > 1e-4f);
}

TEST_CASE("gemma's global layers see the whole context past every window", "[forward]") {
  // gemma2: layer 0 windowed, layer 1 global; gemma3: layers 0-4 windowed, 5 global.
  for (auto [arch, layers, length] : {std::tuple{"gemma2", 2, 30}, std::tuple{"gemma3", 6, 50}}) {
    INFO("arch " << arch);
    ModelWeights w = weights_of(arch_options(arch, layers));
    ModelWeights all_windowed = w;
    all_windowed.config.sliding_window_pattern = 0;  // every layer windowed: position 0 out of reach
    CpuForward fwd = forward_of(std::move(w));
    CpuForward windowed = forward_of(std::move(all_windowed));
    const std::int32_t vocab = fwd.config().vocab_size;
    const auto prompt = prompt_of(std::size_t(length), vocab, 4);
    auto first_changed = prompt;
    first_changed[0] = (first_changed[0] + 1) % vocab;
    CHECK(max_abs_diff(last_logits(fwd, first_changed), last_logits(fwd, prompt)) > 1e-4f);
    CHECK(same_bits(last_logits(windowed, first_changed), last_logits(windowed, prompt)));
  }
}

TEST_CASE("gemma2's final soft-cap bounds every logit by the cap", "[forward]") {
  auto capped_options = arch_options("gemma2");
  capped_options.final_softcap = 2.0f;
  auto open_options = capped_options;
  open_options.final_softcap = 0.0f;
  CpuForward capped = forward_of(weights_of(capped_options));
  CpuForward open = forward_of(weights_of(open_options));
  const auto prompt = prompt_of(12, capped.config().vocab_size, 5);
  const auto c = last_logits(capped, prompt);
  const auto u = last_logits(open, prompt);
  float max_capped = 0, max_open = 0, worst = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    max_capped = std::max(max_capped, std::abs(c[i]));
    max_open = std::max(max_open, std::abs(u[i]));
    worst = std::max(worst, std::abs(c[i] - 2.0f * std::tanh(u[i] / 2.0f)));
  }
  INFO("largest logit capped " << max_capped << ", uncapped " << max_open);
  CHECK(max_open > 2.5f);
  CHECK(max_capped <= 2.0f);
  CHECK(max_capped > 1.5f);
  CHECK(worst < 1e-5f);
}

TEST_CASE("gemma2's attention soft-cap changes the output when it binds", "[forward]") {
  auto tight = arch_options("gemma2");
  tight.attn_softcap = 0.5f;
  auto none = tight;
  none.attn_softcap = 0.0f;
  CpuForward a = forward_of(weights_of(tight));
  CpuForward b = forward_of(weights_of(none));
  const auto prompt = prompt_of(12, a.config().vocab_size, 6);
  CHECK(max_abs_diff(last_logits(a, prompt), last_logits(b, prompt)) > 1e-3f);
}

TEST_CASE("each architecture's own weights and scalings are used", "[forward]") {
  struct Case {
    const char* arch;
    const char* what;
    void (*strip)(ModelWeights&);
  };
  const Case cases[] = {
      {"qwen3", "q/k norms", [](ModelWeights& w) {
         w.config.qk_norm = false;
         for (auto& L : w.layers) L.q_norm = L.k_norm = Tensor{};
       }},
      {"gemma3", "q/k norms", [](ModelWeights& w) {
         w.config.qk_norm = false;
         for (auto& L : w.layers) L.q_norm = L.k_norm = Tensor{};
       }},
      {"gemma2", "post-norms", [](ModelWeights& w) {
         w.config.post_norms = false;
         for (auto& L : w.layers) L.post_attn_norm = L.post_ffn_norm = Tensor{};
       }},
      {"gemma2", "embedding scaling", [](ModelWeights& w) { w.config.embedding_scale = 1.0f; }},
      {"gemma2", "GELU", [](ModelWeights& w) { w.config.ffn_activation = FfnActivation::silu; }},
      {"gemma3", "the windowed layers' rope base", [](ModelWeights& w) { w.config.rope_theta_windowed = 0.0f; }},
      {"llama3", "rope_freqs", [](ModelWeights& w) { w.rope_freqs = Tensor{}; }},
      {"phi3", "longrope factors", [](ModelWeights& w) { w.rope_freqs = Tensor{}; }},
      {"phi3", "the rope attention factor", [](ModelWeights& w) { w.config.rope_scaling.attn_factor = 1.0f; }},
  };
  for (const Case& k : cases) {
    INFO(k.arch << " without " << k.what);
    ModelWeights w = weights_of(arch_options(k.arch, std::string(k.arch) == "gemma3" ? 6 : 2));
    ModelWeights stripped = w;
    k.strip(stripped);
    CpuForward with = forward_of(std::move(w));
    CpuForward without = forward_of(std::move(stripped));
    // Positions far enough for rope differences to show.
    const auto prompt = prompt_of(40, with.config().vocab_size, 7);
    CHECK(max_abs_diff(last_logits(with, prompt), last_logits(without, prompt)) > 1e-3f);
  }
}
