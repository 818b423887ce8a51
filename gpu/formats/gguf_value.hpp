#pragma once
// One GGUF metadata value: a scalar, a string, or a flat array of either.
// Numeric arrays keep their little-endian bytes as stored, so a copy to a new
// file (make-test-model copying a vocabulary) is exact whatever the type.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::model {

enum class GgufType : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

const char* gguf_type_name(GgufType t);
// Bytes of one scalar of type t; 0 for string and array.
std::size_t gguf_scalar_bytes(GgufType t);
bool gguf_type_known(std::uint32_t raw);

struct GgufValue {
  GgufType type = GgufType::u32;
  // Scalars: every integer and bool widened to int64/uint64 as stored, floats to double.
  std::uint64_t u = 0;
  std::int64_t i = 0;
  double f = 0.0;
  std::string s;
  // Arrays.
  GgufType elem_type = GgufType::u8;
  std::uint64_t count = 0;
  std::vector<std::string> strings;  // elem_type == string
  std::vector<std::byte> raw;        // other elem types: count * scalar bytes, little-endian

  static GgufValue of_u32(std::uint32_t v);
  static GgufValue of_i32(std::int32_t v);
  static GgufValue of_u64(std::uint64_t v);
  static GgufValue of_f32(float v);
  static GgufValue of_bool(bool v);
  static GgufValue of_string(std::string v);
  static GgufValue of_strings(std::vector<std::string> v);
  static GgufValue of_f32_array(const std::vector<float>& v);
  static GgufValue of_i32_array(const std::vector<std::int32_t>& v);

  bool is_integer() const;
  bool is_float() const { return type == GgufType::f32 || type == GgufType::f64; }
  // Conversions that accept any compatible stored type; nullopt otherwise
  // (a negative value asked as unsigned, a string asked as a number).
  std::optional<std::int64_t> as_int() const;
  std::optional<double> as_number() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const { return type == GgufType::string ? &s : nullptr; }
  // A numeric array converted element by element; nullopt for non-numeric.
  std::optional<std::vector<double>> as_numbers() const;
  std::optional<std::vector<float>> as_floats() const;
  std::optional<std::vector<std::int64_t>> as_ints() const;

  std::string describe() const;  // short human-readable form for inspect
};

}  // namespace pensieve::model
