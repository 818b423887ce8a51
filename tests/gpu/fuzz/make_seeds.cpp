// Writes small valid inputs for the fuzz targets (a one-layer GGUF with a
// vocabulary, a safetensors file, a config.json, a tokenizer.json), so that
// fuzzing starts from the interesting part of the input space.
#include "gpu/formats/gguf_writer.hpp"
#include "gpu/formats/safetensors_writer.hpp"

#include <cstdio>
#include <fstream>
#include <string>

using namespace pensieve::model;

namespace {

void write(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<std::byte> gguf_seed(bool new_types) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::of_string("llama"));
  w.set("llama.block_count", GgufValue::of_u32(1));
  w.set("llama.embedding_length", GgufValue::of_u32(32));
  w.set("llama.attention.head_count", GgufValue::of_u32(2));
  w.set("llama.attention.head_count_kv", GgufValue::of_u32(1));
  w.set("llama.feed_forward_length", GgufValue::of_u32(32));
  w.set("llama.rope.freq_base", GgufValue::of_f32(10000.0f));
  w.set("tokenizer.ggml.model", GgufValue::of_string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::of_strings({"<unk>", "<s>", "</s>", "a"}));
  w.set("tokenizer.ggml.scores", GgufValue::of_f32_array({0, 0, 0, -1}));
  w.set("tokenizer.ggml.token_type", GgufValue::of_i32_array({2, 3, 3, 1}));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::of_u32(1));
  auto add = [&](const char* name, DType t, std::vector<std::int64_t> ne) {
    std::int64_t n = 1;
    for (std::size_t d = 1; d < ne.size(); ++d) n *= ne[d];
    (void)w.add_tensor(name, t, ne, std::vector<std::byte>(dtype_row_bytes(t, ne[0]) * std::size_t(n)));
  };
  add("token_embd.weight", DType::q8_0, {32, 4});
  add("blk.0.attn_norm.weight", DType::f32, {32});
  add("blk.0.attn_q.weight", DType::f16, {32, 32});
  // The second seed holds the block types of 32 (the K-quants' 256 do not
  // fit this model's 32-wide rows).
  add("blk.0.attn_k.weight", new_types ? DType::q4_1 : DType::f16, {32, 16});
  add("blk.0.attn_v.weight", new_types ? DType::q5_0 : DType::f16, {32, 16});
  add("blk.0.attn_output.weight", new_types ? DType::q5_1 : DType::bf16, {32, 32});
  add("blk.0.ffn_norm.weight", DType::f32, {32});
  add("blk.0.ffn_gate.weight", new_types ? DType::iq4_nl : DType::q8_0, {32, 32});
  add("blk.0.ffn_up.weight", new_types ? DType::q4_0 : DType::q8_0, {32, 32});
  add("blk.0.ffn_down.weight", DType::q8_0, {32, 32});
  add("output_norm.weight", DType::f32, {32});
  return w.serialize();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_seeds GGUF_DIR SAFETENSORS_DIR\n");
    return 2;
  }
  const std::string gguf_dir = argv[1], st_dir = argv[2];
  write(gguf_dir + "/seed.gguf", gguf_seed(false));
  write(gguf_dir + "/seed_blocks.gguf", gguf_seed(true));
  std::vector<SafetensorsOut> t;
  t.push_back({"model.norm.weight", DType::f32, {2}, std::vector<std::byte>(8)});
  t.push_back({"model.embed_tokens.weight", DType::bf16, {2, 2}, std::vector<std::byte>(8)});
  write(st_dir + "/seed.safetensors", serialize_safetensors(t, {{"format", "pt"}}));
  std::ofstream(st_dir + "/config.json")
      << R"({"model_type":"llama","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,)"
      << R"("num_attention_heads":4,"num_key_value_heads":2,"vocab_size":32000,"rope_scaling":{"rope_type":"llama3",)"
      << R"("factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192}})";
  std::ofstream(st_dir + "/tokenizer.json")
      << R"({"added_tokens":[{"id":3,"content":"<s>","special":true}],"pre_tokenizer":{"type":"ByteLevel"},)"
      << R"("model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b",["a","b"]]},)"
      << R"("chat_template":"x","bos_token":"<s>"})";
  return 0;
}
