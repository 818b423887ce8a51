// Every quantised type loads from a GGUF; refused types are named; a
// truncated or malformed block (non-finite scale) is an Error naming the
// tensor, its type and the block.
#include "gpu/formats/quant_block_check.hpp"
#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/formats/gguf_writer.hpp"
#include "tests/gpu/quant_test_blocks.hpp"
#include "tests/result_checks.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

using namespace pensieve::model;

namespace {

constexpr std::int64_t dim = 256, vocab = 4;

// A one-layer llama of width 256 whose attn_q is of type `q_type` (random
// valid blocks), the rest F32 zeros.
std::vector<std::byte> model_with_q(DType q_type) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::of_string("llama"));
  w.set("llama.block_count", GgufValue::of_u32(1));
  w.set("llama.embedding_length", GgufValue::of_u32(dim));
  w.set("llama.attention.head_count", GgufValue::of_u32(2));
  w.set("llama.feed_forward_length", GgufValue::of_u32(dim));
  auto add = [&](const std::string& name, std::vector<std::int64_t> ne, DType t) {
    const std::int64_t rows = ne.size() > 1 ? ne[1] : 1;
    std::vector<std::byte> data(dtype_row_bytes(t, ne[0]) * std::size_t(rows));
    if (t != DType::f32)
      data = pensieve::testing::random_blocks(t, rows * ne[0] / dtype_block_elems(t), 3);
    REQUIRE_OK(w.add_tensor(name, t, ne, data));
  };
  add("token_embd.weight", {dim, vocab}, DType::f32);
  add("blk.0.attn_norm.weight", {dim}, DType::f32);
  add("blk.0.attn_q.weight", {dim, dim}, q_type);
  for (const char* n : {"attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
    add(std::string("blk.0.") + n + ".weight", {dim, dim}, DType::f32);
  add("blk.0.ffn_norm.weight", {dim}, DType::f32);
  add("output_norm.weight", {dim}, DType::f32);
  return w.serialize();
}

}  // namespace

TEST_CASE("every quantised type loads from a GGUF with its type and row size", "[gguf][quant]") {
  for (DType t : pensieve::testing::quantised_dtypes) {
    INFO(dtype_name(t));
    const auto bytes = model_with_q(t);
    auto file = parse_gguf(bytes, "q.gguf");
    REQUIRE_OK(file);
    auto w = weights_from_gguf(*file);
    REQUIRE_OK(w);
    CHECK(w->layers[0].wq.dtype == t);
    CHECK(w->layers[0].wq.size_bytes == dtype_row_bytes(t, dim) * std::size_t(dim));
    CHECK(dtype_from_ggml(std::uint32_t(ggml_from_dtype(t))) == t);
  }
}

TEST_CASE("a non-finite scale or min in any block is an error naming the tensor, type and block",
          "[gguf][quant]") {
  for (DType t : pensieve::testing::quantised_dtypes) {
    for (std::size_t field : pensieve::testing::f16_fields(t)) {
      INFO(dtype_name(t) << " field at " << field);
      auto bytes = model_with_q(t);
      auto file = parse_gguf(bytes, "q.gguf");
      REQUIRE_OK(file);
      const GgufTensorInfo* q = file->find_tensor("blk.0.attn_q.weight");
      REQUIRE(q != nullptr);
      const std::size_t at = std::size_t(q->data - bytes.data()) + 5 * dtype_block_bytes(t) + field;
      const std::uint16_t nan = 0x7e00;
      std::memcpy(bytes.data() + at, &nan, 2);
      auto bad = parse_gguf(bytes, "q.gguf");
      REQUIRE_OK(bad);
      auto w = weights_from_gguf(*bad);
      REQUIRE_FALSE(bool(w));
      CHECK_THAT(w.error().message,
                 Catch::Contains(std::string("tensor blk.0.attn_q.weight (") + dtype_name(t) +
                                 "): block 5 has a non-finite " +
                                 (field == pensieve::testing::f16_fields(t)[0] ? "scale" : "min")));
    }
  }
}

TEST_CASE("a quantised tensor with fewer bytes than its blocks is refused as truncated",
          "[gguf][quant]") {
  for (DType t : pensieve::testing::quantised_dtypes) {
    INFO(dtype_name(t));
    const auto bytes = pensieve::testing::random_blocks(t, 4, 9);
    const std::int64_t cols = 4 * dtype_block_elems(t);
    const Tensor whole{"w", t, {1, cols}, bytes.data(), bytes.size()};
    CHECK(bool(check_quant_blocks(whole)));
    const Tensor cut{"w", t, {1, cols}, bytes.data(), bytes.size() - 1};
    auto r = check_quant_blocks(cut);
    REQUIRE_FALSE(bool(r));
    CHECK_THAT(r.error().message, Catch::Contains("truncated"));
    const Tensor empty{"w", t, {1, cols}, nullptr, 0};  // no bytes at all (found by fuzzing)
    CHECK_FALSE(bool(check_quant_blocks(empty)));
  }
}

TEST_CASE("a tensor type this engine refuses is named as ggml names it", "[gguf][quant]") {
  for (auto [number, name] : {std::pair{16u, "IQ2_XXS"},
                              {18u, "IQ3_XXS"},
                              {22u, "IQ2_S"},
                              {29u, "IQ1_M"},
                              {34u, "TQ1_0"},
                              {35u, "TQ2_0"},
                              {15u, "Q8_K"},
                              {19u, "IQ1_S"}}) {
    auto bytes = model_with_q(DType::q4_k);
    const char* tensor = "blk.0.attn_q.weight";
    const auto* b = reinterpret_cast<const char*>(bytes.data());
    const auto it = std::search(b, b + bytes.size(), tensor, tensor + std::strlen(tensor));
    REQUIRE(it != b + bytes.size());
    const std::size_t type_at =
        std::size_t(it - b) + std::strlen(tensor) + 4 + 16;  // n_dims, 2 dims
    std::memcpy(bytes.data() + type_at, &number, 4);
    auto r = parse_gguf(bytes, "q.gguf");
    REQUIRE_FALSE(bool(r));
    CHECK_THAT(r.error().message, Catch::Contains("unsupported tensor type " +
                                                  std::to_string(number) + " (" + name + ")"));
  }
}
