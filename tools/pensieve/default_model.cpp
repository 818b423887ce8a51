#include "tools/pensieve/default_model.hpp"

#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/test_model.hpp"

#include <cstdlib>
#include <system_error>
#include <unistd.h>

namespace pensieve::server {

namespace fs = std::filesystem;

fs::path default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "pensieve";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "pensieve";
  return fs::path(".cache") / "pensieve";
}

Result<fs::path> ensure_default_model(const fs::path& cache_dir) {
  // The name carries the recipe's version: a changed recipe writes a new file.
  const fs::path model = cache_dir / "builtin-m-tiny-v1.gguf";
  if (fs::exists(model)) return model;
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) return fail("cannot create " + cache_dir.string() + ": " + ec.message());
  // Written under a private name, then renamed: two servers starting at once
  // never read a half-written model.
  const std::string suffix = "." + std::to_string(::getpid()) + ".tmp";
  const fs::path vocab = cache_dir / ("builtin-vocab" + suffix);
  const fs::path partial = cache_dir / ("builtin-m-tiny-v1.gguf" + suffix);
  if (auto r = model::write_builtin_vocab_gguf(vocab); !r) return r.error();
  model::TestModelOptions o;  // M-tiny of ../shared/BENCH.md, seed 7
  o.n_layers = 4;
  o.dim = 256;
  o.n_heads = 8;
  o.n_kv_heads = 4;
  o.ff_dim = 688;
  o.dtype = model::DType::f32;
  o.seed = 7;
  o.vocab_from = vocab;
  o.name = "pensieve-builtin";
  auto written = model::make_test_model(o, partial);
  fs::remove(vocab, ec);
  if (!written) return written.error();
  fs::rename(partial, model, ec);
  if (ec) return fail("cannot move the default model into " + model.string() + ": " + ec.message());
  return model;
}

}  // namespace pensieve::server
