#pragma once
// The built-in default model: generated on first use (deterministic random
// weights, the built-in byte-fallback vocabulary and a ChatML template), so
// the server runs with no download. Its replies are meaningless.
#include "runtime/error.hpp"

#include <filesystem>

namespace pensieve::server {

// Writes the default model under `cache_dir` unless it is there already, and
// returns its path.
Result<std::filesystem::path> ensure_default_model(const std::filesystem::path& cache_dir);

// $XDG_CACHE_HOME/pensieve, else $HOME/.cache/pensieve, else ./.cache/pensieve.
std::filesystem::path default_cache_dir();

}  // namespace pensieve::server
