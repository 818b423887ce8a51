// pensieve-model: inspect models, make test models, tokenize, run.
#include "tools/pensieve-model/commands.hpp"

#include <cstdio>
#include <cstring>

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* usage;
};

constexpr Command commands[] = {
    {"inspect", pensieve::tools::cmd_inspect, "inspect [--cpu] FILE|DIR  |  inspect --cpu"},
    {"make-test-model", pensieve::tools::cmd_make_test_model,
     "make-test-model --out FILE.gguf --layers N --dim D --heads H --kv-heads K --ff F --vocab-from VOCAB.gguf "
     "[--arch llama|llama3|llama3.2|qwen3|mistral|phi3|gemma2|gemma3] [--head-dim N] [--sliding-window N] "
     "[--rope-theta T] [--attn-softcap C] [--final-softcap C] "
     "[--dtype f32|f16|q8_0] [--seed S] [--untied] [--chat-template TEXT] [--safetensors-dir DIR]"},
    {"tokenize", pensieve::tools::cmd_tokenize, "tokenize FILE [--bos] < text"},
    {"detokenize", pensieve::tools::cmd_detokenize, "detokenize FILE < ids"},
    {"run", pensieve::tools::cmd_run,
     "run FILE (--prompt-ids \"1 2 3\" | --prompt TEXT) --max-tokens N --temperature 0 [--top-logits K]"},
    {"render-template", pensieve::tools::cmd_render_template,
     "render-template TEMPLATE.jinja CONTEXT.json | render-template --batch CASES.json"},
    {"pre-tokenize", pensieve::tools::cmd_pre_tokenize, "pre-tokenize NAME < text | pre-tokenize --batch CASES.json"},
};

void usage() {
  std::fprintf(stderr, "usage: pensieve-model COMMAND ...\n");
  for (const auto& c : commands) std::fprintf(stderr, "  pensieve-model %s\n", c.usage);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return 2;
  }
  for (const auto& c : commands) {
    if (std::strcmp(argv[1], c.name) == 0) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "pensieve-model: unknown command '%s'\n", argv[1]);
  usage();
  return 2;
}
