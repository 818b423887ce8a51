// The safetensors parser reads what the writer wrote and turns every
// malformed header, offset or size into an Error naming the file.
#include "gpu/formats/safetensors_file.hpp"
#include "gpu/formats/safetensors_writer.hpp"
#include "tests/result_checks.hpp"

#include <catch2/catch.hpp>

#include <cstring>

using namespace pensieve::model;

namespace {

std::vector<std::byte> bytes_of(std::initializer_list<float> values) {
  std::vector<std::byte> out(values.size() * 4);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

std::vector<std::byte> two_tensors() {
  std::vector<SafetensorsOut> t;
  t.push_back({"a.weight", DType::f32, {2, 2}, bytes_of({1, 2, 3, 4})});
  t.push_back({"b.bias", DType::f16, {3}, std::vector<std::byte>(6, std::byte{0x3c})});
  return serialize_safetensors(t, {{"format", "pt"}});
}

// A file whose header is `json` and whose data section is `data_bytes` zeros.
std::vector<std::byte> with_header(const std::string& json, std::size_t data_bytes = 16) {
  std::vector<std::byte> out(8 + json.size() + data_bytes);
  const std::uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, json.data(), json.size());
  return out;
}

std::string error_of(const std::vector<std::byte>& bytes) {
  auto r = parse_safetensors(bytes, "bad.safetensors");
  REQUIRE_FALSE(bool(r));
  CHECK_THAT(r.error().message, Catch::StartsWith("bad.safetensors: safetensors: "));
  return r.error().message;
}

}  // namespace

TEST_CASE("a safetensors file reads back what was written", "[safetensors]") {
  const auto bytes = two_tensors();
  auto file = parse_safetensors(bytes, "ok.safetensors");
  REQUIRE_OK(file);
  REQUIRE(file->tensors.size() == 2);
  const SafetensorsTensor* a = file->find("a.weight");
  REQUIRE(a != nullptr);
  CHECK(a->dtype == DType::f32);
  CHECK(a->shape == std::vector<std::int64_t>{2, 2});
  REQUIRE(a->size_bytes == 16);
  float v[4];
  std::memcpy(v, a->data, 16);
  CHECK(v[3] == 4.0f);
  const SafetensorsTensor* b = file->find("b.bias");
  REQUIRE(b != nullptr);
  CHECK(b->dtype == DType::f16);
  CHECK(b->size_bytes == 6);
  CHECK(file->metadata.at("format") == "pt");
  // The data section starts 8-byte aligned.
  CHECK((reinterpret_cast<std::uintptr_t>(a->data) - reinterpret_cast<std::uintptr_t>(bytes.data())) % 8 == 0);
}

TEST_CASE("a safetensors file truncated at any byte is an error", "[safetensors]") {
  const auto bytes = two_tensors();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(n));
    auto r = parse_safetensors(cut, "cut.safetensors");
    REQUIRE_FALSE(bool(r));
    REQUIRE_THAT(r.error().message, Catch::StartsWith("cut.safetensors: safetensors: "));
  }
}

TEST_CASE("bad safetensors headers are named", "[safetensors]") {
  CHECK_THAT(error_of({}), Catch::Contains("no header length"));
  auto huge = two_tensors();
  const std::uint64_t n = std::uint64_t(1) << 50;
  std::memcpy(huge.data(), &n, 8);
  CHECK_THAT(error_of(huge), Catch::Contains("absurd header length"));
  CHECK_THAT(error_of(with_header("{not json")), Catch::Contains("header is not JSON"));
  CHECK_THAT(error_of(with_header("[1, 2]")), Catch::Contains("not a JSON object"));
  CHECK_THAT(error_of(with_header(R"({"x": 3})")), Catch::Contains("tensor 'x': entry is not an object"));
  CHECK_THAT(error_of(with_header(R"({"x": {"dtype": "F32", "shape": [2]}})")),
             Catch::Contains("needs dtype (string), shape and data_offsets"));
}

TEST_CASE("bad safetensors tensor entries are named with the tensor", "[safetensors]") {
  CHECK_THAT(error_of(with_header(R"({"x": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})")),
             Catch::Contains("tensor 'x': unknown dtype 'Q4'"));
  CHECK_THAT(error_of(with_header(R"({"x": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})")),
             Catch::Contains("bad dimension"));
  CHECK_THAT(error_of(with_header(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})")),
             Catch::Contains("data_offsets must be [begin, end]"));
  CHECK_THAT(error_of(with_header(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})")),
             Catch::Contains("data_offsets must be [begin, end]"));
  CHECK_THAT(error_of(with_header(R"({"x": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})")),
             Catch::Contains("tensor 'x': data [0, 32) runs past the end of the file"));
  CHECK_THAT(error_of(with_header(R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})")),
             Catch::Contains("holds 8 bytes but its shape and dtype need 12"));
  CHECK_THAT(error_of(with_header(
                 R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})")),
             Catch::Contains("overflows"));
  CHECK_THAT(error_of(with_header(R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 18446744073709551615]}})")),
             Catch::Contains("runs past the end"));
}

TEST_CASE("safetensors tensors of types the engine does not compute in are kept but typeless", "[safetensors]") {
  auto file = parse_safetensors(with_header(R"({"ids": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})"),
                                "ids.safetensors");
  REQUIRE_OK(file);
  REQUIRE(file->find("ids") != nullptr);
  CHECK_FALSE(bool(file->find("ids")->dtype.has_value()));
  CHECK(file->find("ids")->dtype_name == "I64");
}
