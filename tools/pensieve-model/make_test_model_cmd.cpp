// pensieve-model make-test-model: a small GGUF with deterministic random
// weights and a real vocabulary, of any --arch the engine runs (llama by
// default; test_model.hpp), optionally also as a Hugging Face directory
// (llama only).
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/hf_export.hpp"
#include "gpu/model/test_model.hpp"
#include "tools/pensieve-model/commands.hpp"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

namespace pensieve::tools {

namespace {

template <class T>
bool parse_number(const char* text, T& out) {
  const char* end = text + std::strlen(text);
  auto [p, ec] = std::from_chars(text, end, out);
  return ec == std::errc() && p == end;
}

int bad(const std::string& reason) {
  std::fprintf(stderr, "pensieve-model make-test-model: %s\n", reason.c_str());
  return 2;
}

struct Parsed {
  model::TestModelOptions options;
  std::string out;
  std::optional<std::string> safetensors_dir;
};

// Applies one "--flag value" pair; an empty string on success, else the reason.
std::string apply(Parsed& p, const std::string& flag, const char* value) {
  auto& o = p.options;
  std::int32_t* ints[] = {&o.n_layers, &o.dim, &o.n_heads, &o.n_kv_heads, &o.ff_dim, &o.max_context};
  const char* int_flags[] = {"--layers", "--dim", "--heads", "--kv-heads", "--ff", "--context"};
  for (std::size_t i = 0; i < std::size(int_flags); ++i) {
    if (flag == int_flags[i]) {
      return parse_number(value, *ints[i]) && *ints[i] > 0 ? "" : flag + " needs a positive integer";
    }
  }
  if (flag == "--out") p.out = value;
  else if (flag == "--vocab-from") o.vocab_from = value;
  else if (flag == "--chat-template") o.chat_template = value;
  else if (flag == "--name") o.name = value;
  else if (flag == "--safetensors-dir") p.safetensors_dir = value;
  else if (flag == "--arch") o.arch = value;
  else if (flag == "--head-dim") {
    return parse_number(value, o.head_dim) && o.head_dim > 0 ? "" : "--head-dim needs a positive integer";
  } else if (flag == "--sliding-window") {
    return parse_number(value, o.sliding_window) && o.sliding_window >= 0 ? ""
                                                                          : "--sliding-window needs an integer >= 0";
  } else if (flag == "--rope-theta") {
    return parse_number(value, o.rope_theta) && o.rope_theta > 0.0f ? "" : "--rope-theta needs a positive number";
  } else if (flag == "--attn-softcap") {
    return parse_number(value, o.attn_softcap) && o.attn_softcap >= 0.0f ? "" : "--attn-softcap needs a number >= 0";
  } else if (flag == "--final-softcap") {
    return parse_number(value, o.final_softcap) && o.final_softcap >= 0.0f ? "" : "--final-softcap needs a number >= 0";
  }
  else if (flag == "--seed") return parse_number(value, o.seed) ? "" : "--seed needs a non-negative integer";
  else if (flag == "--dtype") {
    const std::string d = value;
    if (d == "f32") o.dtype = model::DType::f32;
    else if (d == "f16") o.dtype = model::DType::f16;
    else if (d == "q8_0") o.dtype = model::DType::q8_0;
    else return "--dtype must be f32, f16 or q8_0";
  } else {
    return "unknown option " + flag;
  }
  return "";
}

}  // namespace

int cmd_make_test_model(int argc, char** argv) {
  Parsed p;
  p.options.vocab_from.reset();
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--untied") {  // the one flag without a value
      p.options.tied_output = false;
      --i;
      continue;
    }
    if (i + 1 >= argc) return bad(flag + " needs a value");
    if (auto reason = apply(p, flag, argv[i + 1]); !reason.empty()) return bad(reason);
  }
  if (p.out.empty()) return bad("--out FILE.gguf is required");
  if (!p.options.vocab_from) return bad("--vocab-from VOCAB.gguf is required");
  if (auto ok = model::make_test_model(p.options, p.out); !ok) {
    std::fprintf(stderr, "pensieve-model make-test-model: %s\n", ok.error().message.c_str());
    return 1;
  }
  std::printf("wrote %s (random weights, seed %llu: not a trained model)\n", p.out.c_str(),
              static_cast<unsigned long long>(p.options.seed));
  if (p.safetensors_dir) {
    auto weights = model::load_gguf(p.out);
    auto ok = weights ? model::export_hf_directory(*weights, *p.safetensors_dir) : Result<void>(weights.error());
    if (!ok) {
      std::fprintf(stderr, "pensieve-model make-test-model: %s\n", ok.error().message.c_str());
      return 1;
    }
    std::printf("wrote %s (the same weights as a Hugging Face directory; Q/K rows in rotate_half order)\n",
                p.safetensors_dir->c_str());
  }
  return 0;
}

}  // namespace pensieve::tools
