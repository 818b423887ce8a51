// pensieve-model run FILE (--prompt-ids "1 2 3" | --prompt "text") [--max-tokens N]
//     [--temperature T] [--seed S] [--top-logits K] [--threads N] [--stop-at-eos]
//   Runs the CPU forward pass and prints one JSON line:
//   {"generated":[ids...],"logits":[[[id,logit]...K]...]}  (top-K raw logits per
//   generated step, most likely first; "text" too when the prompt was text).
//   Temperature 0 (the default) is greedy with ties to the lowest id. EOS is an
//   ordinary token unless --stop-at-eos.
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/sampler.hpp"
#include "gpu/text/tokenizer.hpp"
#include "tools/pensieve-model/commands.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::tools {

namespace {

struct RunArgs {
  std::string file;
  std::optional<std::string> prompt_ids, prompt_text;
  std::int32_t max_tokens = 16;
  float temperature = 0.0f;
  std::uint64_t seed = 0;
  std::int32_t top_logits = 0;
  std::size_t threads = 0;
  bool stop_at_eos = false;
};

template <class T>
bool parse_number(std::string_view text, T& out) {
  if constexpr (std::is_floating_point_v<T>) {
    try {
      std::size_t used = 0;
      out = T(std::stod(std::string(text), &used));
      return used == text.size();
    } catch (...) {
      return false;
    }
  } else {
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && p == text.data() + text.size();
  }
}

bool parse_run_args(int argc, char** argv, RunArgs& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    const std::string_view value = has_value ? std::string_view(argv[i + 1]) : std::string_view();
    bool ok = true;
    if (arg == "--stop-at-eos") { a.stop_at_eos = true; continue; }
    if (!arg.starts_with("--")) {
      if (!a.file.empty()) ok = false;
      a.file = arg;
      if (ok) continue;
    } else if (!has_value) {
      std::fprintf(stderr, "pensieve-model run: %s needs a value\n", argv[i]);
      return false;
    } else if (arg == "--prompt-ids") a.prompt_ids = std::string(value);
    else if (arg == "--prompt") a.prompt_text = std::string(value);
    else if (arg == "--max-tokens") ok = parse_number(value, a.max_tokens) && a.max_tokens >= 0;
    else if (arg == "--temperature") ok = parse_number(value, a.temperature) && a.temperature >= 0;
    else if (arg == "--seed") ok = parse_number(value, a.seed);
    else if (arg == "--top-logits") ok = parse_number(value, a.top_logits) && a.top_logits >= 0;
    else if (arg == "--threads") ok = parse_number(value, a.threads) && a.threads > 0;
    else ok = false;
    if (!ok) {
      std::fprintf(stderr, "pensieve-model run: unexpected or bad argument '%s'\n", argv[i]);
      return false;
    }
    ++i;
  }
  if (a.file.empty()) {
    std::fprintf(stderr, "pensieve-model run: missing FILE\n");
    return false;
  }
  if (a.prompt_ids.has_value() == a.prompt_text.has_value()) {
    std::fprintf(stderr, "pensieve-model run: give exactly one of --prompt-ids and --prompt\n");
    return false;
  }
  return true;
}

Result<std::vector<std::int32_t>> parse_ids(const std::string& text, std::int32_t vocab) {
  std::vector<std::int32_t> ids;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    std::int32_t id = 0;
    if (!parse_number(std::string_view(word), id) || id < 0 || id >= vocab) {
      return fail("--prompt-ids: '" + word + "' is not a token id of this model (vocabulary " +
                  std::to_string(vocab) + ")");
    }
    ids.push_back(id);
  }
  if (ids.empty()) return fail("--prompt-ids: no ids");
  return ids;
}

// The K largest logits, most likely first, ties to the lowest id.
std::vector<std::int32_t> top_ids(std::span<const float> logits, std::int32_t k) {
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min<std::int32_t>(k, std::int32_t(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[std::size_t(a)] != logits[std::size_t(b)] ? logits[std::size_t(a)] > logits[std::size_t(b)] : a < b;
  });
  ids.resize(std::size_t(k));
  return ids;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') { out += '\\'; out += char(c); }
    else if (c < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", c); out += buf; }
    else out += char(c);
  }
  return out;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  RunArgs a;
  if (!parse_run_args(argc, argv, a)) return 2;
  auto weights = model::load_model(a.file);
  if (!weights) {
    std::fprintf(stderr, "pensieve-model run: %s\n", weights.error().message.c_str());
    return 1;
  }
  std::optional<model::Tokenizer> tokenizer;
  if (weights->tokenizer) {
    auto t = model::Tokenizer::from_data(*weights->tokenizer);
    if (t) tokenizer = std::move(*t);
  }
  const std::int32_t vocab = weights->config.vocab_size;
  std::vector<std::int32_t> prompt;
  if (a.prompt_text) {
    if (!tokenizer) {
      std::fprintf(stderr, "pensieve-model run: %s has no tokenizer; use --prompt-ids\n", a.file.c_str());
      return 1;
    }
    prompt = tokenizer->encode(*a.prompt_text, tokenizer->adds_bos_by_default(), false);
  } else {
    auto ids = parse_ids(*a.prompt_ids, vocab);
    if (!ids) {
      std::fprintf(stderr, "pensieve-model run: %s\n", ids.error().message.c_str());
      return 2;
    }
    prompt = std::move(*ids);
  }
  model::CpuForwardOptions options;
  options.n_threads = a.threads;
  auto fwd = model::CpuForward::create(std::move(*weights), options);
  if (!fwd) {
    std::fprintf(stderr, "pensieve-model run: %s: %s\n", a.file.c_str(), fwd.error().message.c_str());
    return 1;
  }
  model::SamplingParams sp;
  sp.temperature = a.temperature;
  sp.seed = a.seed;
  sp.max_tokens = a.max_tokens;
  sp.ignore_eos = !a.stop_at_eos;
  model::VocabInfo info{vocab, {}};
  if (tokenizer && a.stop_at_eos) {
    for (auto id : {tokenizer->eos_id(), tokenizer->eot_id()}) if (id) info.eos_ids.push_back(*id);
  }
  if (auto why = model::validate(sp); !why.empty()) {
    std::fprintf(stderr, "pensieve-model run: %s\n", why.c_str());
    return 2;
  }
  model::Sampler sampler(sp, info, prompt);
  auto kv = fwd->make_kv_cache(std::int32_t(prompt.size()) + a.max_tokens);
  std::vector<std::int32_t> feed = prompt, generated;
  std::string logits_json;
  std::int32_t pos = 0;
  for (std::int32_t step = 0; step < a.max_tokens; ++step) {
    const model::ForwardSequence seq{feed, pos, &kv};
    auto out = fwd->forward({&seq, 1});
    if (!out) {
      std::fprintf(stderr, "pensieve-model run: %s\n", out.error().message.c_str());
      return 1;
    }
    const auto logits = out->last(0);
    const std::int32_t token = sampler.sample(logits).token;
    generated.push_back(token);
    if (a.top_logits > 0) {
      logits_json += step ? ",[" : "[";
      const auto ids = top_ids(logits, a.top_logits);
      for (std::size_t i = 0; i < ids.size(); ++i) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s[%d,%.6f]", i ? "," : "", ids[i], double(logits[std::size_t(ids[i])]));
        logits_json += buf;
      }
      logits_json += "]";
    }
    pos += std::int32_t(feed.size());
    feed = {token};
    if (sampler.finish_reason(token) != model::FinishReason::none) break;
  }
  std::string line = "{\"generated\":[";
  for (std::size_t i = 0; i < generated.size(); ++i) line += (i ? "," : "") + std::to_string(generated[i]);
  line += "],\"logits\":[" + logits_json + "]";
  if (a.prompt_text && tokenizer) line += ",\"text\":\"" + json_escape(tokenizer->decode(generated)) + "\"";
  std::printf("%s}\n", line.c_str());
  return 0;
}

}  // namespace pensieve::tools
