#include "gpu/formats/gguf_file.hpp"

namespace pensieve::model {

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = key_index_.find(std::string(key));
  return it == key_index_.end() ? nullptr : &metadata[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

namespace {

Error wrong_type(const GgufFile& file, std::string_view key, const char* wanted, const GgufValue& v) {
  return fail(file.label + ": GGUF: key '" + std::string(key) + "' should be " + wanted + ", found " +
              gguf_type_name(v.type) + " " + v.describe());
}

}  // namespace

Result<std::optional<std::int64_t>> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<std::int64_t>();
  auto n = v->is_integer() ? v->as_int() : std::nullopt;
  if (!n) return wrong_type(*this, key, "an integer", *v);
  return std::optional<std::int64_t>(*n);
}

Result<std::optional<double>> GgufFile::get_number(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<double>();
  auto n = v->type == GgufType::boolean ? std::nullopt : v->as_number();
  if (!n) return wrong_type(*this, key, "a number", *v);
  return std::optional<double>(*n);
}

Result<std::optional<bool>> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<bool>();
  auto b = v->as_bool();
  if (!b) return wrong_type(*this, key, "a bool", *v);
  return std::optional<bool>(*b);
}

Result<std::optional<std::string>> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (v->type != GgufType::string) return wrong_type(*this, key, "a string", *v);
  return std::optional<std::string>(v->s);
}

}  // namespace pensieve::model
