// Malformed GGUF files give a clear Error naming the file and the problem,
// never a crash or an out-of-bounds read (this suite also runs under ASan).
#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/formats/gguf_writer.hpp"
#include "tests/shared_data.hpp"
#include "tests/result_checks.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

using namespace pensieve::model;

namespace {

constexpr std::int64_t dim = 32, ff = 64, vocab = 4;

std::vector<std::byte> zeros_f32(std::int64_t n) { return std::vector<std::byte>(std::size_t(n) * 4); }

// A valid one-layer llama (dim 32, 2 heads, 1 kv head, ff 64, 4 tokens);
// `q_rows` lets a test give attn_q the wrong shape, `skip` drop a tensor.
GgufWriter small_model(std::int64_t q_rows = dim, const std::string& skip = "") {
  GgufWriter w;
  w.set("general.architecture", GgufValue::of_string("llama"));
  w.set("llama.block_count", GgufValue::of_u32(1));
  w.set("llama.embedding_length", GgufValue::of_u32(dim));
  w.set("llama.attention.head_count", GgufValue::of_u32(2));
  w.set("llama.attention.head_count_kv", GgufValue::of_u32(1));
  w.set("llama.feed_forward_length", GgufValue::of_u32(ff));
  w.set("tokenizer.ggml.model", GgufValue::of_string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::of_strings({"<unk>", "<s>", "</s>", "a"}));
  w.set("tokenizer.ggml.scores", GgufValue::of_f32_array({0, 0, 0, -1}));
  auto add = [&](const std::string& name, std::vector<std::int64_t> ne) {
    if (name == skip) return;
    std::int64_t n = 1;
    for (auto d : ne) n *= d;
    REQUIRE_OK(w.add_tensor(name, DType::f32, ne, zeros_f32(n)));
  };
  add("token_embd.weight", {dim, vocab});
  add("blk.0.attn_norm.weight", {dim});
  add("blk.0.attn_q.weight", {dim, q_rows});
  add("blk.0.attn_k.weight", {dim, dim / 2});
  add("blk.0.attn_v.weight", {dim, dim / 2});
  add("blk.0.attn_output.weight", {dim, dim});
  add("blk.0.ffn_norm.weight", {dim});
  add("blk.0.ffn_gate.weight", {dim, ff});
  add("blk.0.ffn_up.weight", {dim, ff});
  add("blk.0.ffn_down.weight", {ff, dim});
  add("output_norm.weight", {dim});
  return w;
}

// Offset just past the first occurrence of `text` in `bytes`.
std::size_t after(const std::vector<std::byte>& bytes, const std::string& text) {
  const auto* b = reinterpret_cast<const char*>(bytes.data());
  const auto it = std::search(b, b + bytes.size(), text.begin(), text.end());
  REQUIRE(it != b + bytes.size());
  return std::size_t(it - b) + text.size();
}

template <class T>
void poke(std::vector<std::byte>& bytes, std::size_t pos, T value) {
  REQUIRE(pos + sizeof value <= bytes.size());
  std::memcpy(bytes.data() + pos, &value, sizeof value);
}

std::string parse_error(const std::vector<std::byte>& bytes) {
  auto r = parse_gguf(bytes, "bad.gguf");
  REQUIRE_FALSE(bool(r));
  CHECK_THAT(r.error().message, Catch::StartsWith("bad.gguf: GGUF"));
  return r.error().message;
}

// Offset of a tensor's info fields (n_dims, dims..., type, offset) after its name.
std::size_t tensor_info(const std::vector<std::byte>& bytes, const std::string& name) { return after(bytes, name); }

}  // namespace

TEST_CASE("the small test GGUF is valid before it is corrupted", "[gguf]") {
  const auto bytes = small_model().serialize();
  auto file = parse_gguf(bytes, "small.gguf");
  REQUIRE_OK(file);
  CHECK(file->tensors.size() == 11);
  auto w = weights_from_gguf(*file);
  REQUIRE_OK(w);
  CHECK(w->config.n_layers == 1);
  CHECK(w->config.vocab_size == 4);
  CHECK(w->config.tied_output);
}

TEST_CASE("a GGUF truncated at any byte is an error", "[gguf]") {
  const auto bytes = small_model().serialize();
  auto file = parse_gguf(bytes, "small.gguf");
  REQUIRE_OK(file);
  const auto& last = file->tensors.back();
  const std::size_t end = file->data_offset + last.offset + last.size_bytes;
  for (std::size_t n = 0; n < end; ++n) {
    const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(n));
    auto r = parse_gguf(cut, "cut.gguf");
    REQUIRE_FALSE(bool(r));
    REQUIRE_THAT(r.error().message, Catch::StartsWith("cut.gguf: GGUF: "));
  }
}

TEST_CASE("the shared tiny llama truncated at many offsets is an error", "[gguf]") {
  const auto path = pensieve::testing::shared_file("models/tiny-llama-f16.gguf");
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bytes = std::as_bytes(std::span(chars));
  REQUIRE_OK(parse_gguf(bytes, "tiny.gguf"));
  for (std::size_t n = 0; n < bytes.size(); n += 1 + n / 8) {
    auto r = parse_gguf(bytes.first(n), "tiny.gguf");
    REQUIRE_FALSE(bool(r));
    REQUIRE_THAT(r.error().message, Catch::StartsWith("tiny.gguf: GGUF: "));
  }
}

TEST_CASE("a wrong magic or version is named", "[gguf]") {
  auto bytes = small_model().serialize();
  auto wrong = bytes;
  wrong[0] = std::byte{'X'};
  CHECK_THAT(parse_error(wrong), Catch::Contains("wrong magic"));
  for (std::uint32_t v : {1u, 4u, 0xffffffffu}) {
    auto versioned = bytes;
    poke<std::uint32_t>(versioned, 4, v);
    CHECK_THAT(parse_error(versioned), Catch::Contains("unsupported version " + std::to_string(v)));
  }
  auto v2 = bytes;
  poke<std::uint32_t>(v2, 4, 2);
  CHECK_OK(parse_gguf(v2, "v2.gguf"));
}

TEST_CASE("absurd counts and lengths are refused before anything is allocated", "[gguf]") {
  const auto bytes = small_model().serialize();
  auto kv = bytes;
  poke<std::uint64_t>(kv, 16, std::uint64_t(1) << 60);
  CHECK_THAT(parse_error(kv), Catch::Contains("absurd metadata count"));
  auto tensors = bytes;
  poke<std::uint64_t>(tensors, 8, std::uint64_t(1) << 60);
  CHECK_THAT(parse_error(tensors), Catch::Contains("absurd tensor count"));
  auto key = bytes;
  poke<std::uint64_t>(key, 24, std::uint64_t(1) << 62);
  CHECK_THAT(parse_error(key), Catch::Contains("absurd string length"));
  auto past = bytes;
  poke<std::uint64_t>(past, 24, bytes.size());
  CHECK_THAT(parse_error(past), Catch::Contains("runs past the end of the file"));
  auto array = bytes;
  const std::size_t count_at = after(array, "tokenizer.ggml.tokens") + 8;  // value type, element type
  poke<std::uint64_t>(array, count_at, std::uint64_t(1) << 40);
  CHECK_THAT(parse_error(array), Catch::Contains("key 'tokenizer.ggml.tokens': absurd array length"));
  auto scores = bytes;
  poke<std::uint64_t>(scores, after(scores, "tokenizer.ggml.scores") + 8, std::uint64_t(1) << 61);
  CHECK_THAT(parse_error(scores), Catch::Contains("absurd array length"));
  auto elem = bytes;
  poke<std::uint32_t>(elem, after(elem, "tokenizer.ggml.tokens") + 4, 9);
  CHECK_THAT(parse_error(elem), Catch::Contains("nested arrays"));
  auto type = bytes;
  poke<std::uint32_t>(type, after(type, "general.architecture"), 13);
  CHECK_THAT(parse_error(type), Catch::Contains("unknown value type 13"));
}

TEST_CASE("bad tensor infos are named with the tensor", "[gguf]") {
  const auto bytes = small_model().serialize();
  const std::size_t q = tensor_info(bytes, "blk.0.attn_q.weight");  // n_dims, ne0, ne1, type, offset
  auto dims = bytes;
  poke<std::uint32_t>(dims, q, 5);
  CHECK_THAT(parse_error(dims), Catch::Contains("'blk.0.attn_q.weight': 5 dimensions"));
  auto zero_dims = bytes;
  poke<std::uint32_t>(zero_dims, q, 0);
  CHECK_THAT(parse_error(zero_dims), Catch::Contains("0 dimensions"));
  auto overflow = bytes;
  poke<std::uint64_t>(overflow, q + 4, std::uint64_t(1) << 40);
  poke<std::uint64_t>(overflow, q + 12, std::uint64_t(1) << 40);
  CHECK_THAT(parse_error(overflow), Catch::Contains("'blk.0.attn_q.weight': size overflows"));
  auto huge = bytes;
  poke<std::uint64_t>(huge, q + 4, ~std::uint64_t(0));
  CHECK_THAT(parse_error(huge), Catch::Contains("absurd dimension"));
  auto type = bytes;
  poke<std::uint32_t>(type, q + 20, 99);
  CHECK_THAT(parse_error(type), Catch::Contains("unsupported tensor type 99"));
  auto q8_row = bytes;
  poke<std::uint32_t>(q8_row, q + 20, 8);  // Q8_0 with rows of 32 is fine; 33 is not
  poke<std::uint64_t>(q8_row, q + 4, 33);
  CHECK_THAT(parse_error(q8_row), Catch::Contains("not a multiple of the Q8_0 block"));
  auto offset = bytes;
  poke<std::uint64_t>(offset, q + 24, std::uint64_t(1) << 40);
  CHECK_THAT(parse_error(offset), Catch::Contains("'blk.0.attn_q.weight': data") && Catch::Contains("runs past the end"));
  auto near_end = bytes;
  poke<std::uint64_t>(near_end, q + 24, bytes.size() / 32 * 32);
  CHECK_THAT(parse_error(near_end), Catch::Contains("runs past the end"));
  auto misaligned = bytes;
  poke<std::uint64_t>(misaligned, q + 24, 4);
  CHECK_THAT(parse_error(misaligned), Catch::Contains("not a multiple of the alignment"));
}

TEST_CASE("duplicate keys, duplicate tensors and a bad alignment are errors", "[gguf]") {
  auto bytes = small_model().serialize();
  auto dup = bytes;
  const std::size_t second_key = after(dup, "tokenizer.ggml.model") - 20;
  std::memcpy(dup.data() + second_key, "general.architecture", 20);  // same length as the key it replaces
  CHECK_THAT(parse_error(dup), Catch::Contains("duplicate metadata key"));
  auto dup_tensor = bytes;
  const std::size_t name = after(dup_tensor, "blk.0.attn_k.weight") - 19;
  std::memcpy(dup_tensor.data() + name, "blk.0.attn_v.weight", 19);
  CHECK_THAT(parse_error(dup_tensor), Catch::Contains("duplicate tensor name 'blk.0.attn_v.weight'"));
  GgufWriter w = small_model();
  w.set("general.alignment", GgufValue::of_u32(24));
  CHECK_THAT(parse_error(w.serialize()), Catch::Contains("general.alignment must be a power-of-two"));
}

TEST_CASE("a tensor shape that disagrees with the config is named", "[gguf]") {
  auto file = parse_gguf(small_model(dim / 2).serialize(), "shape.gguf");
  REQUIRE_OK(file);
  auto w = weights_from_gguf(*file);
  REQUIRE_FALSE(bool(w));
  CHECK(w.error().message ==
        "shape.gguf: tensor blk.0.attn_q.weight has shape {16, 32} but the config needs {32, 32}");
}

TEST_CASE("a missing tensor or metadata key is named", "[gguf]") {
  auto file = parse_gguf(small_model(dim, "blk.0.ffn_up.weight").serialize(), "missing.gguf");
  REQUIRE_OK(file);
  auto w = weights_from_gguf(*file);
  REQUIRE_FALSE(bool(w));
  CHECK(w.error().message == "missing.gguf: GGUF model: missing tensor blk.0.ffn_up.weight");
  GgufWriter wrong_type = small_model();
  wrong_type.set("llama.block_count", GgufValue::of_string("one"));
  auto typed = parse_gguf(wrong_type.serialize(), "typed.gguf");
  REQUIRE_OK(typed);
  auto t = weights_from_gguf(*typed);
  REQUIRE_FALSE(bool(t));
  CHECK_THAT(t.error().message, Catch::Contains("key 'llama.block_count' should be an integer"));
  GgufWriter bad_heads = small_model();
  bad_heads.set("llama.attention.head_count_kv", GgufValue::of_u32(3));
  auto heads = parse_gguf(bad_heads.serialize(), "heads.gguf");
  REQUIRE_OK(heads);
  CHECK_FALSE(bool(weights_from_gguf(*heads)));
}

TEST_CASE("special token ids past the vocabulary are errors", "[gguf]") {
  GgufWriter w = small_model();
  w.set("tokenizer.ggml.bos_token_id", GgufValue::of_u32(4));
  auto file = parse_gguf(w.serialize(), "bos.gguf");
  REQUIRE_OK(file);
  auto model = weights_from_gguf(*file);
  REQUIRE_FALSE(bool(model));
  CHECK_THAT(model.error().message, Catch::Contains("tokenizer.ggml.bos_token_id = 4 is past the vocabulary"));
}

TEST_CASE("a missing or unreadable file is an error naming it", "[gguf]") {
  auto r = read_gguf("/nonexistent/model.gguf");
  REQUIRE_FALSE(bool(r));
  CHECK_THAT(r.error().message, Catch::StartsWith("/nonexistent/model.gguf: cannot open"));
  auto empty = parse_gguf({}, "empty.gguf");
  REQUIRE_FALSE(bool(empty));
  CHECK_THAT(empty.error().message, Catch::Contains("truncated while reading the magic"));
}
