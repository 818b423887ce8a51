#include "gpu/formats/safetensors_file.hpp"

#include "gpu/formats/mmap_file.hpp"

#include <boost/json.hpp>

#include <cstring>
#include <limits>

namespace pensieve::model {

namespace json = boost::json;

namespace {

struct DtypeInfo {
  const char* name;
  std::size_t bytes;
  std::optional<DType> dtype;
};

constexpr DtypeInfo dtype_table[] = {
    {"F32", 4, DType::f32}, {"F16", 2, DType::f16}, {"BF16", 2, DType::bf16}, {"F64", 8, std::nullopt},
    {"I64", 8, std::nullopt}, {"U64", 8, std::nullopt}, {"I32", 4, std::nullopt}, {"U32", 4, std::nullopt},
    {"I16", 2, std::nullopt}, {"U16", 2, std::nullopt}, {"I8", 1, std::nullopt}, {"U8", 1, std::nullopt},
    {"BOOL", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
};

const DtypeInfo* find_dtype(std::string_view name) {
  for (const auto& d : dtype_table) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

Error st_error(const std::string& label, const std::string& what) {
  return fail(label + ": safetensors: " + what);
}

// A non-negative JSON integer, or nullopt.
std::optional<std::uint64_t> as_size(const json::value& v) {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return std::uint64_t(v.get_int64());
  return std::nullopt;
}

Result<SafetensorsTensor> parse_entry(const std::string& label, const std::string& name, const json::value& v,
                                      std::span<const std::byte> data) {
  const json::object* obj = v.if_object();
  const std::string where = "tensor '" + name + "': ";
  if (obj == nullptr) return st_error(label, where + "entry is not an object");
  const json::value* dtype = obj->if_contains("dtype");
  const json::value* shape = obj->if_contains("shape");
  const json::value* offsets = obj->if_contains("data_offsets");
  if (!dtype || !dtype->is_string() || !shape || !shape->is_array() || !offsets || !offsets->is_array()) {
    return st_error(label, where + "needs dtype (string), shape and data_offsets (arrays)");
  }
  SafetensorsTensor t;
  t.name = name;
  t.dtype_name = std::string(dtype->get_string());
  const DtypeInfo* info = find_dtype(t.dtype_name);
  if (info == nullptr) return st_error(label, where + "unknown dtype '" + t.dtype_name + "'");
  t.dtype = info->dtype;
  if (shape->get_array().size() > 8) return st_error(label, where + "more than 8 dimensions");
  std::uint64_t numel = 1;
  for (const auto& d : shape->get_array()) {
    auto n = as_size(d);
    if (!n || *n > (std::uint64_t(1) << 48)) return st_error(label, where + "bad dimension in shape");
    if (*n != 0 && numel > (std::numeric_limits<std::uint64_t>::max() / 16) / *n) {
      return st_error(label, where + "shape overflows");
    }
    numel *= *n;
    t.shape.push_back(std::int64_t(*n));
  }
  const auto& off = offsets->get_array();
  auto begin = off.size() == 2 ? as_size(off[0]) : std::nullopt;
  auto end = off.size() == 2 ? as_size(off[1]) : std::nullopt;
  if (!begin || !end || *end < *begin) return st_error(label, where + "data_offsets must be [begin, end]");
  if (*end > data.size()) {
    return st_error(label, where + "data [" + std::to_string(*begin) + ", " + std::to_string(*end) +
                               ") runs past the end of the file (data section is " + std::to_string(data.size()) +
                               " bytes)");
  }
  if (*end - *begin != numel * info->bytes) {
    return st_error(label, where + "holds " + std::to_string(*end - *begin) + " bytes but its shape and dtype need " +
                               std::to_string(numel * info->bytes));
  }
  t.data = data.data() + *begin;
  t.size_bytes = std::size_t(*end - *begin);
  return t;
}

}  // namespace

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors[it->second];
}

Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> bytes, std::string label) {
  SafetensorsFile file;
  file.label = std::move(label);
  if (bytes.size() < 8) return st_error(file.label, "truncated: no header length");
  std::uint64_t header_bytes;
  std::memcpy(&header_bytes, bytes.data(), 8);
  if (header_bytes > safetensors_max_header_bytes) {
    return st_error(file.label, "absurd header length " + std::to_string(header_bytes));
  }
  if (header_bytes > bytes.size() - 8) {
    return st_error(file.label, "header of " + std::to_string(header_bytes) + " bytes runs past the end of the file");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), std::size_t(header_bytes));
  boost::system::error_code ec;
  json::value header = json::parse(text, ec);
  if (ec) return st_error(file.label, "header is not JSON: " + ec.message());
  if (!header.is_object()) return st_error(file.label, "header is not a JSON object");
  const auto data = bytes.subspan(8 + std::size_t(header_bytes));
  for (const auto& [key, value] : header.get_object()) {
    const std::string name(key);
    if (name == "__metadata__") {
      if (!value.is_object()) return st_error(file.label, "__metadata__ is not an object");
      for (const auto& [mk, mv] : value.get_object()) {
        if (mv.is_string()) file.metadata[std::string(mk)] = std::string(mv.get_string());
      }
      continue;
    }
    auto t = parse_entry(file.label, name, value, data);
    if (!t) return t.error();
    file.index_.emplace(name, file.tensors.size());
    file.tensors.push_back(std::move(*t));
  }
  return file;
}

Result<SafetensorsFile> read_safetensors(const std::filesystem::path& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  auto file = parse_safetensors((*mapped)->bytes(), path.string());
  if (!file) return file.error();
  file->storage = *mapped;
  return file;
}

}  // namespace pensieve::model
