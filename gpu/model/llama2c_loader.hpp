#pragma once
// Loads a llama2.c `.bin` checkpoint (Karpathy's legacy export: a header of
// 7 int32 — dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len — then F32 weights in llama2.c's order). A positive vocab_size
// means the classifier is the token embedding. RoPE is interleaved with
// freq 10000^(-2i/head_dim), as in llama2.c's run.c. The file is memory
// mapped; the mapping is the ModelWeights' storage.
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <cstddef>
#include <filesystem>
#include <span>

namespace pensieve::model {

Result<ModelWeights> load_llama2c(const std::filesystem::path& path);

// The same from bytes already in memory (kept alive by `storage`); `name`
// is used in error messages. For tests and fuzzing.
Result<ModelWeights> load_llama2c_bytes(std::span<const std::byte> bytes,
                                        std::shared_ptr<const void> storage,
                                        const std::string& name);

}  // namespace pensieve::model
