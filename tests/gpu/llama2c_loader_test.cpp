// The llama2.c checkpoint loader: the real stories260K file and damaged copies.
#include "gpu/model/llama2c_loader.hpp"
#include "tests/shared_data.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

using namespace pensieve::model;

namespace {

std::vector<std::byte> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

pensieve::Result<ModelWeights> load(const std::vector<std::byte>& bytes) {
  return load_llama2c_bytes(bytes, nullptr, "test.bin");
}

}  // namespace

TEST_CASE("stories260K loads with the config its header describes and a shared classifier",
          "[llama2c]") {
  auto w = load_llama2c(pensieve::testing::shared_file("models/stories260K.bin"));
  REQUIRE(w.has_value());
  const ModelConfig& c = w->config;
  CHECK(c.dim == 64);
  CHECK(c.ff_dim == 172);
  CHECK(c.n_layers == 5);
  CHECK(c.n_heads == 8);
  CHECK(c.n_kv_heads == 4);
  CHECK(c.head_dim == 8);
  CHECK(c.vocab_size == 512);
  CHECK(c.max_context == 512);
  CHECK(c.tied_output);
  CHECK(c.rope_style == RopeStyle::interleaved);
  CHECK(w->output.data == w->token_embedding.data);
  CHECK(w->layers[4].wk.shape == std::vector<std::int64_t>{32, 64});
  CHECK(w->layers[4].w_down.shape == std::vector<std::int64_t>{64, 172});
  // The first embedding value sits right after the 28-byte header.
  float first;
  std::memcpy(&first, w->token_embedding.data, 4);
  const auto bytes = file_bytes(pensieve::testing::shared_file("models/stories260K.bin"));
  float expected;
  std::memcpy(&expected, bytes.data() + 28, 4);
  CHECK(first == expected);
}

TEST_CASE("a truncated llama2.c checkpoint is an error naming the file, not a crash", "[llama2c]") {
  auto bytes = file_bytes(pensieve::testing::shared_file("models/stories260K.bin"));
  for (std::size_t keep : {std::size_t(0), std::size_t(10), std::size_t(28), bytes.size() / 2,
                           bytes.size() - 1}) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(keep));
    auto w = load(cut);
    REQUIRE_FALSE(w.has_value());
    CHECK(w.error().message.find("test.bin") != std::string::npos);
    CHECK(w.error().message.find("truncated") != std::string::npos);
  }
}

TEST_CASE("a llama2.c header with absurd or inconsistent sizes is rejected", "[llama2c]") {
  auto bytes = file_bytes(pensieve::testing::shared_file("models/stories260K.bin"));
  auto with_field = [&](int field, std::int32_t value) {
    auto copy = bytes;
    std::memcpy(copy.data() + 4 * field, &value, 4);
    return load(copy);
  };
  CHECK_FALSE(with_field(0, -64).has_value());        // negative dim
  CHECK_FALSE(with_field(0, 1 << 30).has_value());    // absurd dim
  CHECK_FALSE(with_field(3, 7).has_value());          // 64 not divisible by 7 heads
  CHECK_FALSE(with_field(4, 3).has_value());          // 8 heads not a multiple of 3
  CHECK_FALSE(with_field(5, 0).has_value());          // no vocabulary
  auto untied = with_field(5, -512);                  // untied: needs a classifier too
  REQUIRE_FALSE(untied.has_value());
  CHECK(untied.error().message.find("truncated") != std::string::npos);
  auto longer = bytes;
  longer.resize(bytes.size() + 4);
  CHECK_FALSE(load(longer).has_value());
}
