#include "gpu/formats/gguf_value.hpp"

#include <bit>
#include <cstring>

namespace pensieve::model {

static_assert(std::endian::native == std::endian::little, "GGUF is read as little-endian");

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::u8: return "u8";
    case GgufType::i8: return "i8";
    case GgufType::u16: return "u16";
    case GgufType::i16: return "i16";
    case GgufType::u32: return "u32";
    case GgufType::i32: return "i32";
    case GgufType::f32: return "f32";
    case GgufType::boolean: return "bool";
    case GgufType::string: return "string";
    case GgufType::array: return "array";
    case GgufType::u64: return "u64";
    case GgufType::i64: return "i64";
    case GgufType::f64: return "f64";
  }
  return "?";
}

std::size_t gguf_scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean: return 1;
    case GgufType::u16:
    case GgufType::i16: return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32: return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64: return 8;
    case GgufType::string:
    case GgufType::array: return 0;
  }
  return 0;
}

bool gguf_type_known(std::uint32_t raw) { return raw <= 12; }

namespace {

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Decodes one scalar of type t at p into (signed, unsigned, float) views.
struct Decoded {
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double f = 0.0;
  bool is_unsigned = false;
  bool is_float = false;
};

Decoded decode(GgufType t, const std::byte* p) {
  Decoded d;
  switch (t) {
    case GgufType::u8: d.u = load<std::uint8_t>(p); d.is_unsigned = true; break;
    case GgufType::boolean: d.u = load<std::uint8_t>(p) != 0; d.is_unsigned = true; break;
    case GgufType::u16: d.u = load<std::uint16_t>(p); d.is_unsigned = true; break;
    case GgufType::u32: d.u = load<std::uint32_t>(p); d.is_unsigned = true; break;
    case GgufType::u64: d.u = load<std::uint64_t>(p); d.is_unsigned = true; break;
    case GgufType::i8: d.i = load<std::int8_t>(p); break;
    case GgufType::i16: d.i = load<std::int16_t>(p); break;
    case GgufType::i32: d.i = load<std::int32_t>(p); break;
    case GgufType::i64: d.i = load<std::int64_t>(p); break;
    case GgufType::f32: d.f = load<float>(p); d.is_float = true; break;
    case GgufType::f64: d.f = load<double>(p); d.is_float = true; break;
    default: break;
  }
  return d;
}

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

GgufValue GgufValue::of_u32(std::uint32_t v) {
  GgufValue x;
  x.type = GgufType::u32;
  x.u = v;
  x.i = v;
  return x;
}

GgufValue GgufValue::of_i32(std::int32_t v) {
  GgufValue x;
  x.type = GgufType::i32;
  x.i = v;
  return x;
}

GgufValue GgufValue::of_u64(std::uint64_t v) {
  GgufValue x;
  x.type = GgufType::u64;
  x.u = v;
  return x;
}

GgufValue GgufValue::of_f32(float v) {
  GgufValue x;
  x.type = GgufType::f32;
  x.f = v;
  return x;
}

GgufValue GgufValue::of_bool(bool v) {
  GgufValue x;
  x.type = GgufType::boolean;
  x.u = v ? 1 : 0;
  return x;
}

GgufValue GgufValue::of_string(std::string v) {
  GgufValue x;
  x.type = GgufType::string;
  x.s = std::move(v);
  return x;
}

GgufValue GgufValue::of_strings(std::vector<std::string> v) {
  GgufValue x;
  x.type = GgufType::array;
  x.elem_type = GgufType::string;
  x.count = v.size();
  x.strings = std::move(v);
  return x;
}

GgufValue GgufValue::of_f32_array(const std::vector<float>& v) {
  GgufValue x;
  x.type = GgufType::array;
  x.elem_type = GgufType::f32;
  x.count = v.size();
  x.raw = bytes_of(v);
  return x;
}

GgufValue GgufValue::of_i32_array(const std::vector<std::int32_t>& v) {
  GgufValue x;
  x.type = GgufType::array;
  x.elem_type = GgufType::i32;
  x.count = v.size();
  x.raw = bytes_of(v);
  return x;
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::u8: case GgufType::i8: case GgufType::u16: case GgufType::i16:
    case GgufType::u32: case GgufType::i32: case GgufType::u64: case GgufType::i64:
      return true;
    default: return false;
  }
}

std::optional<std::int64_t> GgufValue::as_int() const {
  if (!is_integer() && type != GgufType::boolean) return std::nullopt;
  switch (type) {
    case GgufType::u8: case GgufType::u16: case GgufType::u32: case GgufType::u64:
    case GgufType::boolean:
      if (u > std::uint64_t(INT64_MAX)) return std::nullopt;
      return std::int64_t(u);
    default: return i;
  }
}

std::optional<double> GgufValue::as_number() const {
  if (is_float()) return f;
  if (auto v = as_int()) return double(*v);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (type == GgufType::boolean) return u != 0;
  return std::nullopt;
}

std::optional<std::vector<double>> GgufValue::as_numbers() const {
  const std::size_t width = gguf_scalar_bytes(elem_type);
  if (type != GgufType::array || width == 0) return std::nullopt;
  std::vector<double> out;
  out.reserve(count);
  for (std::uint64_t k = 0; k < count; ++k) {
    const Decoded d = decode(elem_type, raw.data() + k * width);
    out.push_back(d.is_float ? d.f : d.is_unsigned ? double(d.u) : double(d.i));
  }
  return out;
}

std::optional<std::vector<float>> GgufValue::as_floats() const {
  auto numbers = as_numbers();
  if (!numbers) return std::nullopt;
  return std::vector<float>(numbers->begin(), numbers->end());
}

std::optional<std::vector<std::int64_t>> GgufValue::as_ints() const {
  const std::size_t width = gguf_scalar_bytes(elem_type);
  if (type != GgufType::array || width == 0) return std::nullopt;
  if (elem_type == GgufType::f32 || elem_type == GgufType::f64) return std::nullopt;
  std::vector<std::int64_t> out;
  out.reserve(count);
  for (std::uint64_t k = 0; k < count; ++k) {
    const Decoded d = decode(elem_type, raw.data() + k * width);
    out.push_back(d.is_unsigned ? std::int64_t(d.u) : d.i);
  }
  return out;
}

std::string GgufValue::describe() const {
  switch (type) {
    case GgufType::string: {
      const auto nl = s.find('\n');
      std::string shown = s.substr(0, std::min<std::size_t>(nl, 60));
      if (shown.size() < s.size()) shown += "...";
      return "\"" + shown + "\"";
    }
    case GgufType::array:
      return std::string("[") + gguf_type_name(elem_type) + " x " + std::to_string(count) + "]";
    case GgufType::boolean: return u ? "true" : "false";
    case GgufType::f32:
    case GgufType::f64: return std::to_string(f);
    default: {
      auto v = as_int();
      return v ? std::to_string(*v) : std::to_string(u);
    }
  }
}

}  // namespace pensieve::model
