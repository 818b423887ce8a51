// pensieve-model inspect [--cpu] FILE|DIR: what a model is and what it
// needs; --cpu: which matmul kernel each weight type runs on this CPU.
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/kernels/cpu/q8_matmul.hpp"
#include "gpu/kernels/cpu/quant_dot.hpp"
#include "gpu/model/model_loader.hpp"
#include "tools/pensieve-model/commands.hpp"

#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

namespace pensieve::tools {

namespace {

using model::ModelWeights;
using model::Tensor;

std::string shape_str(const Tensor& t) {
  std::string s = "[";
  for (std::size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "]";
}

std::string mib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f bytes (%.2f MiB)", bytes, bytes / (1024.0 * 1024.0));
  return buf;
}

std::vector<const Tensor*> all_tensors(const ModelWeights& w) {
  std::vector<const Tensor*> out{&w.token_embedding};
  for (const auto& L : w.layers) {
    for (const Tensor* t : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm,
                            &L.post_attn_norm, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down, &L.post_ffn_norm}) {
      out.push_back(t);
    }
  }
  out.push_back(&w.output_norm);
  if (!w.config.tied_output) out.push_back(&w.output);
  out.push_back(&w.rope_freqs);
  std::erase_if(out, [](const Tensor* t) { return !t->present(); });
  return out;
}

void print_config(const model::ModelConfig& c) {
  const char* scaling = c.rope_scaling.type == model::RopeScalingType::none     ? "none"
                        : c.rope_scaling.type == model::RopeScalingType::linear ? "linear"
                                                                                 : "llama3";
  std::printf("architecture: %s%s%s\n", c.architecture.c_str(), c.name.empty() ? "" : "  name: ", c.name.c_str());
  std::printf("layers %d, dim %d, heads %d (kv heads %d, head dim %d), ff %d, vocab %d, context %d\n", c.n_layers,
              c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.ff_dim, c.vocab_size, c.max_context);
  std::printf("rope: %s, theta %g, dims %d, scaling %s (factor %g); rms eps %g; qkv bias %s; output %s\n",
              c.rope_style == model::RopeStyle::interleaved ? "interleaved" : "half_split", c.rope_theta,
              c.rope_dims, scaling, c.rope_scaling.factor, c.rms_eps, c.qkv_bias ? "yes" : "no",
              c.tied_output ? "tied to the token embedding" : "separate");
  std::string f;
  auto add = [&](const std::string& what) { f += (f.empty() ? "" : ", ") + what; };
  char buf[128];
  if (c.qk_norm) add("q/k norms");
  if (c.post_norms) add("post-norms");
  if (c.ffn_activation == model::FfnActivation::gelu_tanh) add("GeGLU");
  if (c.embedding_scale != 1.0f) add((std::snprintf(buf, sizeof buf, "embedding x %g", c.embedding_scale), buf));
  if (c.attention_scale > 0.0f) add((std::snprintf(buf, sizeof buf, "softmax scale %g", c.attention_scale), buf));
  if (c.sliding_window > 0) {
    std::snprintf(buf, sizeof buf, "sliding window %d on %s", c.sliding_window,
                  c.sliding_window_pattern > 0 ? (std::to_string(c.sliding_window_pattern - 1) + " layers in " +
                                                  std::to_string(c.sliding_window_pattern)).c_str()
                                               : "every layer");
    add(buf);
  }
  if (c.rope_theta_windowed > 0.0f) add((std::snprintf(buf, sizeof buf, "windowed rope theta %g", c.rope_theta_windowed), buf));
  if (c.attn_logit_softcap > 0.0f) add((std::snprintf(buf, sizeof buf, "attention soft-cap %g", c.attn_logit_softcap), buf));
  if (c.final_logit_softcap > 0.0f) add((std::snprintf(buf, sizeof buf, "final soft-cap %g", c.final_logit_softcap), buf));
  if (c.rope_scaling.attn_factor != 1.0f) add((std::snprintf(buf, sizeof buf, "rope attn factor %g", c.rope_scaling.attn_factor), buf));
  if (!f.empty()) std::printf("features: %s\n", f.c_str());
}

void print_tensors(const ModelWeights& w) {
  const auto tensors = all_tensors(w);
  std::map<std::string, int> by_type;
  double bytes = 0;
  for (const Tensor* t : tensors) {
    by_type[model::dtype_name(t->dtype)]++;
    bytes += double(t->size_bytes);
  }
  std::printf("tensors: %zu (", tensors.size());
  bool first = true;
  for (const auto& [type, n] : by_type) {
    std::printf("%s%d %s", first ? "" : ", ", n, type.c_str());
    first = false;
  }
  std::printf(")\n");
  for (const Tensor* t : tensors) {
    std::printf("  %-40s %-5s %s\n", t->name.c_str(), model::dtype_name(t->dtype), shape_str(*t).c_str());
  }
  const auto& c = w.config;
  const double kv_elems = 2.0 * c.n_layers * c.kv_dim();
  std::printf("memory: weights %s\n", mib(bytes).c_str());
  std::printf("memory: KV cache per token %s in F16, %s in F32 (%d tokens of context: %s in F16)\n",
              mib(kv_elems * 2).c_str(), mib(kv_elems * 4).c_str(), c.max_context,
              mib(kv_elems * 2 * c.max_context).c_str());
}

void print_tokenizer(const ModelWeights& w) {
  if (!w.tokenizer) {
    std::printf("tokenizer: none\n");
    return;
  }
  const auto& t = *w.tokenizer;
  std::printf("tokenizer: %s, %zu tokens, %zu merges%s%s; bos %d, eos %d, eot %d, unk %d, pad %d; add bos %s\n",
              t.kind == model::TokenizerKind::sentencepiece ? "sentencepiece" : "byte-level BPE", t.tokens.size(),
              t.merges.size(), t.pre.empty() ? "" : ", pre ", t.pre.c_str(), t.bos_id, t.eos_id, t.eot_id, t.unk_id,
              t.pad_id, t.add_bos ? "yes" : "no");
  if (t.chat_template.empty()) {
    std::printf("chat template: none\n");
  } else {
    const std::string first_line = t.chat_template.substr(0, t.chat_template.find('\n'));
    std::printf("chat template: present (%zu bytes), first line: %s\n", t.chat_template.size(), first_line.c_str());
  }
}

constexpr model::DType quantised_types[] = {
    model::DType::q8_0, model::DType::q4_0,   model::DType::q4_1, model::DType::q5_0,
    model::DType::q5_1, model::DType::iq4_nl, model::DType::q2_k, model::DType::q3_k,
    model::DType::q4_k, model::DType::q5_k,   model::DType::q6_k, model::DType::iq4_xs,
};

// The kernel matmul (gpu/kernels/cpu/matmul.cpp) takes for a quantised type
// with its default (quantised-activation) numerics on this CPU.
// "the 16-row lane tiles (Q4_K), the 8-row tiles (Q5_K, Q6_K)" and the like.
std::string one_token_kernels(const kernels::cpu::KQuantTypes& lanes) {
  std::string in_lanes, in_rows;
  for (model::DType t :
       {model::DType::q4_k, model::DType::q5_k, model::DType::q6_k, model::DType::iq4_xs}) {
    std::string& list = lanes.has(t) ? in_lanes : in_rows;
    list += std::string(list.empty() ? "" : ", ") + model::dtype_name(t);
  }
  std::string out;
  if (!in_lanes.empty()) out = "the 16-row lane tiles (" + in_lanes + ")";
  if (!in_rows.empty())
    out += std::string(out.empty() ? "" : ", ") + "the 8-row tiles (" + in_rows + ")";
  return out;
}

std::string quant_kernel(model::DType t) {
  namespace kc = kernels::cpu;
  if (t == model::DType::q8_0 && kc::q8_vnni_available())
    return "avx512-vnni tiles (q8_matmul, chosen at run time); one token: 8-row tiles; decode "
           "batches of 2-64 tokens: 16-row x up to 8-token tiles; more: packed 32-row panels";
  std::string k = std::string(kc::quant_dot_path_name(kc::quant_dot_best_path(t))) +
                  " (quant_dot, chosen at run time)";
  // quant_matmul's order: a K-quant's lane tiles take its batches, and one
  // token too where this CPU's tuning says (cpu_tuning.hpp).
  const kc::CpuTuning& tuning = kc::host_cpu_tuning();
  const std::string lanes = std::to_string(kc::quant_dot_lane_tile_rows) +
                            "-row lane tiles, more: lane panels (rows unpacked once)";
  const std::string max = std::to_string(kc::quant_dot_lane_tile_tokens_max);
  if (kc::quant_dot_lane_tile_fn(t, kc::QuantDotPath::best, tuning.lane_tile_prefetch)) {
    if (tuning.one_token_lane_tiles.has(t)) return k + "; 1 to " + max + " tokens: " + lanes;
    return k + "; one token: " +
           (kc::quant_dot_tile_fn(t, kc::QuantDotPath::best)
                ? std::to_string(kc::quant_dot_tile_rows) + "-row tiles"
                : std::string("single-row dots")) +
           "; 2 to " + max + " tokens: " + lanes;
  }
  if (kc::quant_dot_tile_fn(t, kc::QuantDotPath::best))
    k += "; one token: " + std::to_string(kc::quant_dot_tile_rows) + "-row tiles";
  if (kc::quant_dot_lane_panel_fn(t, kc::QuantDotPath::best, tuning.lane_panel_prefetch))
    k += "; several tokens: " + std::to_string(kc::quant_dot_lane_tile_rows) +
         "-row lane panels (rows unpacked once), up to " +
         std::to_string(kc::quant_dot_lane_tile_tokens_max) + " tokens a group";
  else if (kc::quant_dot_token_tile_fn(t, kc::QuantDotPath::best))
    k += "; decode batches: " + std::to_string(kc::quant_dot_tile_rows) + "-row x up to " +
         std::to_string(kc::quant_dot_tile_tokens_max) + "-token tiles";
  else if (kc::quant_dot_rows_fn(t, kc::QuantDotPath::best))
    k += "; decode batches: multi-row dots, up to " + std::to_string(kc::quant_dot_rows_max) +
         " tokens per weight row";
  return k;
}

// `used`: the weight types of the inspected model (marked), empty for none.
void print_cpu(const std::set<model::DType>& used) {
  namespace kc = kernels::cpu;
  std::printf("cpu: quant dot paths: avx512-vnni %s, avx2 %s, portable yes; best %s\n",
              kc::quant_dot_path_supported(kc::QuantDotPath::avx512) ? "yes" : "no",
              kc::quant_dot_path_supported(kc::QuantDotPath::avx2) ? "yes" : "no",
              kc::quant_dot_isa());
  std::printf("cpu: float matmul paths: avx512 %s, avx2 %s, portable yes; best %s\n",
              kc::matmul_path_supported(kc::MatmulPath::avx512) ? "yes" : "no",
              kc::matmul_path_supported(kc::MatmulPath::avx2) ? "yes" : "no",
              kc::matmul_path_name(kc::MatmulPath::best));
  const kc::CpuTuning& tuning = kc::host_cpu_tuning();
  std::printf(
      "cpu: tuning %s (%s): K-quant one token through %s; lane tiles prefetch %s, "
      "lane panels %s\n",
      tuning.name, kc::cpu_signature_name(kc::host_cpu_signature()).c_str(),
      one_token_kernels(tuning.one_token_lane_tiles).c_str(),
      kc::prefetch_into_name(tuning.lane_tile_prefetch),
      kc::prefetch_into_name(tuning.lane_panel_prefetch));
  const std::string float_kernel =
      kc::matmul_best_path() == kc::MatmulPath::avx512
          ? "avx512 dot tiles; 2-8 tokens (F32: 2-16): 8-token x 3-row small-batch tiles; then "
            "2-token x 8-row decode tiles (halves, to 32), then the F32 panel GEMM (chosen at run "
            "time)"
          : std::string(kc::matmul_path_name(kc::MatmulPath::best)) +
                " scalar dot tiles (chosen at run time)";
  for (model::DType t : {model::DType::f32, model::DType::f16, model::DType::bf16})
    std::printf("  %-7s %s%s\n", model::dtype_name(t), float_kernel.c_str(),
                used.count(t) ? "  [in this model]" : "");
  for (model::DType t : quantised_types)
    std::printf("  %-7s %s%s\n", model::dtype_name(t), quant_kernel(t).c_str(),
                used.count(t) ? "  [in this model]" : "");
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  bool cpu = false;
  const char* file = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cpu") == 0) {
      cpu = true;
    } else if (!file) {
      file = argv[i];
    } else {
      file = nullptr;
      cpu = false;
      break;
    }
  }
  if (!file && (!cpu || argc != 2)) {
    std::fprintf(stderr, "pensieve-model inspect: expected one FILE or DIR (or --cpu)\n");
    return 2;
  }
  if (!file) {
    print_cpu({});
    return 0;
  }
  const std::filesystem::path path = file;
  auto format = model::detect_model_format(path);
  if (!format) {
    std::fprintf(stderr, "pensieve-model inspect: %s\n", format.error().message.c_str());
    return 1;
  }
  auto weights = model::load_model(path);
  if (!weights) {
    std::fprintf(stderr, "pensieve-model inspect: %s\n", weights.error().message.c_str());
    return 1;
  }
  std::printf("file: %s (%s)\n", path.c_str(), model::model_format_name(*format));
  print_config(weights->config);
  print_tensors(*weights);
  print_tokenizer(*weights);
  if (cpu) {
    std::set<model::DType> used;
    for (const Tensor* t : all_tensors(*weights)) used.insert(t->dtype);
    print_cpu(used);
  }
  return 0;
}

}  // namespace pensieve::tools
