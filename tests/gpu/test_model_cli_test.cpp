// `pensieve-model make-test-model` and `inspect` on the command line: a model
// that loads, and one-line reasons with a non-zero exit for bad arguments.
#include "gpu/kernels/cpu/quant_dot.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/model_loader.hpp"
#include "tests/shared_data.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

using namespace pensieve::model;

namespace {

struct Output {
  int status = -1;
  std::string text;  // stdout and stderr together
};

std::filesystem::path tool() {
  const auto path = std::filesystem::path(PENSIEVE_BINARY_DIR) / "tools" / "pensieve-model";
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "SKIPPED: %s is not built\n", path.c_str());
    std::exit(pensieve::testing::skip_exit_code);
  }
  return path;
}

Output run(const std::string& args) {
  Output out;
  FILE* pipe = ::popen((tool().string() + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) out.text.append(buf.data(), n);
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("pensieve-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("make-test-model writes a GGUF and a Hugging Face twin that both load", "[gguf]") {
  const auto vocab = pensieve::testing::shared_file("vocab/ggml-vocab-llama-spm.gguf");
  const auto dir = temp_dir();
  const auto out = run("make-test-model --out " + (dir / "m.gguf").string() +
                       " --layers 3 --dim 64 --heads 4 --kv-heads 1 --ff 128 --dtype q8_0 --seed 11 --vocab-from " +
                       vocab.string() + " --safetensors-dir " + (dir / "hf").string());
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK_THAT(out.text, Catch::Contains("random weights"));
  auto gguf = load_gguf(dir / "m.gguf");
  REQUIRE(gguf.has_value());
  CHECK(gguf->config.n_layers == 3);
  CHECK(gguf->config.n_kv_heads == 1);
  CHECK(gguf->layers[2].w_down.dtype == DType::q8_0);
  auto hf = load_model(dir / "hf");
  REQUIRE(hf.has_value());
  CHECK(hf->config.n_layers == 3);
  CHECK(hf->layers[2].w_down.dtype == DType::f32);
  const auto inspect = run("inspect " + (dir / "m.gguf").string());
  INFO(inspect.text);
  CHECK(inspect.status == 0);
  CHECK_THAT(inspect.text, Catch::Contains("layers 3, dim 64, heads 4 (kv heads 1, head dim 16), ff 128, vocab 32000"));
  CHECK_THAT(inspect.text, Catch::Contains("tokenizer: sentencepiece, 32000 tokens"));
  CHECK_THAT(inspect.text, Catch::Contains("memory: KV cache per token 192 bytes (0.00 MiB) in F16, 384 bytes"));
}

TEST_CASE("make-test-model --arch writes each architecture's file, and an unknown one is refused", "[gguf]") {
  const auto vocab = pensieve::testing::shared_file("vocab/ggml-vocab-llama-spm.gguf");
  const auto dir = temp_dir();
  const std::pair<const char*, const char*> archs[] = {
      {"llama3", "llama"}, {"llama3.2", "llama"}, {"qwen3", "qwen3"}, {"mistral", "llama"},
      {"phi3", "phi3"},    {"gemma2", "gemma2"},  {"gemma3", "gemma3"}};
  for (const auto& [arch, gguf_arch] : archs) {
    const auto path = dir / (std::string(arch) + ".gguf");
    const bool windowed = std::string(arch) == "mistral" || std::string(arch) == "phi3" ||
                          std::string(gguf_arch).starts_with("gemma");
    const auto out = run(std::string("make-test-model --arch ") + arch + " --out " + path.string() +
                         " --layers 2 --dim 64 --heads 4 --kv-heads 2 --ff 96 --head-dim 16 " +
                         (windowed ? "--sliding-window 6 " : "") + "--vocab-from " + vocab.string());
    INFO(arch << ": " << out.text);
    REQUIRE(out.status == 0);
    auto w = load_gguf(path);
    REQUIRE(w.has_value());
    CHECK(w->config.architecture == gguf_arch);
    CHECK(w->config.sliding_window == (windowed ? 6 : 0));
  }
  const auto inspect = run("inspect " + (dir / "gemma2.gguf").string());
  INFO(inspect.text);
  CHECK(inspect.status == 0);
  CHECK_THAT(inspect.text, Catch::Contains("architecture: gemma2"));
  CHECK_THAT(inspect.text, Catch::Contains("features: post-norms, GeGLU, embedding x 8, softmax scale 0.25, "
                                           "sliding window 6 on 1 layers in 2, attention soft-cap 50, final soft-cap 30"));
  CHECK_THAT(inspect.text, Catch::Contains("blk.1.post_ffw_norm.weight"));
  const auto bad = run("make-test-model --arch mamba --out " + (dir / "x.gguf").string() + " --vocab-from " +
                       vocab.string());
  CHECK(bad.status != 0);
  CHECK_THAT(bad.text, Catch::Contains("unknown --arch 'mamba' (llama, llama3, llama3.2, qwen3, mistral, phi3, gemma2, gemma3)"));
  const auto qwen_window = run("make-test-model --arch qwen3 --sliding-window 4 --out " + (dir / "x.gguf").string() +
                               " --vocab-from " + vocab.string());
  CHECK(qwen_window.status != 0);
  CHECK_THAT(qwen_window.text, Catch::Contains("--arch qwen3 has no sliding window"));
}

TEST_CASE("inspect --cpu names the kernel of every weight type on this CPU", "[gguf][quant_dot]") {
  const auto out = run("inspect --cpu");
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK_THAT(out.text, Catch::Contains(std::string("best ") + pensieve::kernels::cpu::quant_dot_isa()));
  CHECK_THAT(out.text, Catch::Contains(std::string("cpu: tuning ") +
                                       pensieve::kernels::cpu::host_cpu_tuning().name + " (" +
                                       pensieve::kernels::cpu::cpu_signature_name(
                                           pensieve::kernels::cpu::host_cpu_signature()) +
                                       ")"));
  namespace kc = pensieve::kernels::cpu;
  for (DType t : {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, DType::q2_k,
                  DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_xs}) {
    char line[128];
    std::snprintf(line, sizeof line, "  %-7s %s (quant_dot, chosen at run time)", dtype_name(t),
                  kc::quant_dot_path_name(kc::quant_dot_best_path(t)));
    CHECK_THAT(out.text, Catch::Contains(line));
    // A K-quant with lane tiles takes them for its batches, and for one
    // token where the CPU's tuning says (quant_matmul).
    const kc::CpuTuning& tuning = kc::host_cpu_tuning();
    if (kc::quant_dot_lane_tile_fn(t, kc::QuantDotPath::best, tuning.lane_tile_prefetch)) {
      const std::string one = "; one token: 8-row tiles";
      CHECK_THAT(out.text, Catch::Contains(std::string(line) +
                                           (tuning.one_token_lane_tiles.has(t)
                                                ? "; 1 to 8 tokens: 16-row lane tiles"
                                                : one + "; 2 to 8 tokens: 16-row lane tiles")));
    }
  }
}

TEST_CASE("bad make-test-model and inspect arguments give one line and a non-zero exit", "[gguf]") {
  const std::pair<std::string, std::string> cases[] = {
      {"make-test-model --layers 2", "--out FILE.gguf is required"},
      {"make-test-model --out x.gguf --layers -1", "--layers needs a positive integer"},
      {"make-test-model --out x.gguf --dtype q4", "--dtype must be f32, f16 or q8_0"},
      {"make-test-model --out x.gguf --bogus 1", "unknown option --bogus"},
      {"make-test-model --out x.gguf --layers", "--layers needs a value"},
      {"make-test-model --out x.gguf", "--vocab-from VOCAB.gguf is required"},
      {"make-test-model --out x.gguf --sliding-window -2", "--sliding-window needs an integer >= 0"},
      {"inspect /nonexistent.gguf", "no such model file"},
      {"inspect", "expected one FILE or DIR"},
      {"no-such-command", "unknown command 'no-such-command'"},
  };
  for (const auto& [args, reason] : cases) {
    const auto out = run(args);
    INFO(args << " -> " << out.text);
    CHECK(out.status != 0);
    CHECK_THAT(out.text, Catch::Contains(reason));
  }
}
