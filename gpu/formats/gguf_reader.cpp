#include "gpu/formats/gguf_file.hpp"
#include "gpu/formats/mmap_file.hpp"

#include <cstring>
#include <iterator>
#include <limits>

namespace pensieve::model {

namespace {

// Longest key or string this reader accepts: far above any real vocabulary
// entry or chat template, far below what would make a fuzzed length allocate.
constexpr std::uint64_t max_string_bytes = std::uint64_t(1) << 30;

// A bounds-checked reader over the file bytes. Every read first checks that
// the bytes are there; an Error says what was being read and where.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::string& label) : bytes_(bytes), label_(label) {}

  std::size_t pos() const { return pos_; }
  std::size_t remaining() const { return bytes_.size() - pos_; }

  Error error(const std::string& what) const {
    return fail(label_ + ": GGUF: " + what + " (at byte " + std::to_string(pos_) + " of " +
                std::to_string(bytes_.size()) + ")");
  }

  template <class T>
  Result<T> read(const char* what) {
    if (remaining() < sizeof(T)) return error(std::string("truncated while reading ") + what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }

  Result<std::string> read_string(const char* what) {
    auto len = read<std::uint64_t>(what);
    if (!len) return len.error();
    if (*len > max_string_bytes) {
      return error(std::string(what) + ": absurd string length " + std::to_string(*len));
    }
    if (*len > remaining()) {
      return error(std::string(what) + ": string of " + std::to_string(*len) +
                   " bytes runs past the end of the file");
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), std::size_t(*len));
    pos_ += std::size_t(*len);
    // Error is constructible from a string too: say which alternative this is.
    return Result<std::string>(boost::system::in_place_value, std::move(s));
  }

  Result<std::span<const std::byte>> read_bytes(std::uint64_t n, const std::string& what) {
    if (n > remaining()) return error(what + " runs past the end of the file");
    auto s = bytes_.subspan(pos_, std::size_t(n));
    pos_ += std::size_t(n);
    return s;
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& label_;
  std::size_t pos_ = 0;
};

Result<GgufType> read_type(Cursor& cur, const std::string& key) {
  auto raw = cur.read<std::uint32_t>("a value type");
  if (!raw) return raw.error();
  if (!gguf_type_known(*raw)) {
    return cur.error("key '" + key + "': unknown value type " + std::to_string(*raw));
  }
  return GgufType(*raw);
}

Result<void> read_scalar(Cursor& cur, GgufType t, GgufValue& v, const std::string& key) {
  const std::size_t width = gguf_scalar_bytes(t);
  auto bytes = cur.read_bytes(width, "value of key '" + key + "'");
  if (!bytes) return bytes.error();
  std::uint64_t bits = 0;
  std::memcpy(&bits, bytes->data(), width);
  v.u = bits;
  switch (t) {
    case GgufType::i8: v.i = std::int8_t(bits); break;
    case GgufType::i16: v.i = std::int16_t(bits); break;
    case GgufType::i32: v.i = std::int32_t(bits); break;
    case GgufType::i64: v.i = std::int64_t(bits); break;
    case GgufType::f32: { float f; std::memcpy(&f, bytes->data(), 4); v.f = f; break; }
    case GgufType::f64: { double f; std::memcpy(&f, bytes->data(), 8); v.f = f; break; }
    default: v.i = std::int64_t(bits); break;
  }
  return {};
}

Result<void> read_array(Cursor& cur, GgufValue& v, const std::string& key) {
  auto elem = read_type(cur, key);
  if (!elem) return elem.error();
  if (*elem == GgufType::array) return cur.error("key '" + key + "': nested arrays are not supported");
  auto count = cur.read<std::uint64_t>("an array length");
  if (!count) return count.error();
  v.elem_type = *elem;
  v.count = *count;
  if (*elem == GgufType::string) {
    // Each string needs at least its 8-byte length: bound the count before allocating.
    if (*count > cur.remaining() / 8) {
      return cur.error("key '" + key + "': absurd array length " + std::to_string(*count));
    }
    v.strings.reserve(std::size_t(*count));
    for (std::uint64_t k = 0; k < *count; ++k) {
      auto s = cur.read_string("an array string");
      if (!s) return s.error();
      v.strings.push_back(std::move(*s));
    }
    return {};
  }
  const std::size_t width = gguf_scalar_bytes(*elem);
  if (*count > cur.remaining() / width) {
    return cur.error("key '" + key + "': absurd array length " + std::to_string(*count));
  }
  auto bytes = cur.read_bytes(*count * width, "array of key '" + key + "'");
  if (!bytes) return bytes.error();
  v.raw.assign(bytes->begin(), bytes->end());
  return {};
}

Result<void> read_metadata(Cursor& cur, GgufFile& file, std::uint64_t n_kv) {
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes.
  if (n_kv > cur.remaining() / 13) return cur.error("absurd metadata count " + std::to_string(n_kv));
  file.metadata.reserve(std::size_t(n_kv));
  for (std::uint64_t k = 0; k < n_kv; ++k) {
    auto key = cur.read_string("a metadata key");
    if (!key) return key.error();
    auto type = read_type(cur, *key);
    if (!type) return type.error();
    GgufValue v;
    v.type = *type;
    Result<void> ok;
    if (*type == GgufType::string) {
      auto s = cur.read_string("a string value");
      if (!s) return s.error();
      v.s = std::move(*s);
    } else if (*type == GgufType::array) {
      ok = read_array(cur, v, *key);
    } else {
      ok = read_scalar(cur, *type, v, *key);
    }
    if (!ok) return ok.error();
    if (!file.key_index_.emplace(*key, file.metadata.size()).second) {
      return cur.error("duplicate metadata key '" + *key + "'");
    }
    file.metadata.emplace_back(std::move(*key), std::move(v));
  }
  return {};
}

// Bytes of a tensor with dims `ne` of type t; an Error on overflow or a row
// that is not a whole number of quantisation blocks.
Result<std::size_t> tensor_bytes(Cursor& cur, const GgufTensorInfo& t) {
  const std::int64_t block = dtype_block_elems(t.dtype);
  if (t.ne[0] % block != 0) {
    return cur.error("tensor '" + t.name + "': row of " + std::to_string(t.ne[0]) +
                     " elements is not a multiple of the " + dtype_name(t.dtype) + " block (" +
                     std::to_string(block) + ")");
  }
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() / 2;
  std::uint64_t bytes = std::uint64_t(t.ne[0] / block) * dtype_block_bytes(t.dtype);
  for (std::size_t d = 1; d < t.ne.size(); ++d) {
    const auto n = std::uint64_t(t.ne[d]);
    if (n != 0 && bytes > limit / n) return cur.error("tensor '" + t.name + "': size overflows");
    bytes *= n;
  }
  if (bytes > std::numeric_limits<std::size_t>::max()) return cur.error("tensor '" + t.name + "': too large");
  return std::size_t(bytes);
}

Result<GgufTensorInfo> read_tensor_info(Cursor& cur) {
  GgufTensorInfo t;
  auto name = cur.read_string("a tensor name");
  if (!name) return name.error();
  t.name = std::move(*name);
  auto n_dims = cur.read<std::uint32_t>("a tensor's dimension count");
  if (!n_dims) return n_dims.error();
  if (*n_dims == 0 || *n_dims > gguf_max_dims) {
    return cur.error("tensor '" + t.name + "': " + std::to_string(*n_dims) + " dimensions (1 to 4 allowed)");
  }
  for (std::uint32_t d = 0; d < *n_dims; ++d) {
    auto n = cur.read<std::uint64_t>("a tensor dimension");
    if (!n) return n.error();
    if (*n > std::uint64_t(std::numeric_limits<std::int64_t>::max()) / 2) {
      return cur.error("tensor '" + t.name + "': absurd dimension " + std::to_string(*n));
    }
    t.ne.push_back(std::int64_t(*n));
  }
  auto type = cur.read<std::uint32_t>("a tensor type");
  if (!type) return type.error();
  auto dtype = dtype_from_ggml(*type);
  if (!dtype) {
    const std::string name = ggml_type_name(*type);
    return cur.error(
        "tensor '" + t.name + "': unsupported tensor type " + std::to_string(*type) +
        (name.empty() ? "" : " (" + name + ")") +
        " (this engine reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
        "Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
  }
  t.dtype = *dtype;
  auto offset = cur.read<std::uint64_t>("a tensor offset");
  if (!offset) return offset.error();
  t.offset = *offset;
  auto bytes = tensor_bytes(cur, t);
  if (!bytes) return bytes.error();
  t.size_bytes = *bytes;
  return t;
}

Result<void> read_alignment(Cursor& cur, GgufFile& file) {
  const GgufValue* v = file.find("general.alignment");
  if (v == nullptr) return {};
  auto a = v->as_int();
  if (!v->is_integer() || !a || *a <= 0 || (*a & (*a - 1)) != 0 || *a > (1 << 20)) {
    return cur.error("general.alignment must be a power-of-two integer, got " + v->describe());
  }
  file.alignment = std::uint64_t(*a);
  return {};
}

Result<void> place_tensors(Cursor& cur, GgufFile& file, std::span<const std::byte> bytes) {
  const std::uint64_t end_of_index = cur.pos();
  file.data_offset = (end_of_index + file.alignment - 1) / file.alignment * file.alignment;
  if (!file.tensors.empty() && file.data_offset > bytes.size()) {
    return cur.error("the tensor data section starts past the end of the file");
  }
  const std::uint64_t data_bytes = file.data_offset <= bytes.size() ? bytes.size() - file.data_offset : 0;
  for (auto& t : file.tensors) {
    if (t.offset % file.alignment != 0) {
      return cur.error("tensor '" + t.name + "': offset " + std::to_string(t.offset) +
                       " is not a multiple of the alignment " + std::to_string(file.alignment));
    }
    if (t.offset > data_bytes || t.size_bytes > data_bytes - t.offset) {
      return cur.error("tensor '" + t.name + "': data [" + std::to_string(t.offset) + ", +" +
                       std::to_string(t.size_bytes) + ") runs past the end of the file (data section is " +
                       std::to_string(data_bytes) + " bytes)");
    }
    t.data = bytes.data() + file.data_offset + t.offset;
  }
  return {};
}

}  // namespace

std::optional<DType> dtype_from_ggml(std::uint32_t ggml_type) {
  switch (GgmlType(ggml_type)) {
    case GgmlType::f32: return DType::f32;
    case GgmlType::f16: return DType::f16;
    case GgmlType::bf16: return DType::bf16;
    case GgmlType::q8_0: return DType::q8_0;
    case GgmlType::q4_0: return DType::q4_0;
    case GgmlType::q4_k: return DType::q4_k;
    case GgmlType::q4_1: return DType::q4_1;
    case GgmlType::q5_0: return DType::q5_0;
    case GgmlType::q5_1: return DType::q5_1;
    case GgmlType::q2_k: return DType::q2_k;
    case GgmlType::q3_k: return DType::q3_k;
    case GgmlType::q5_k: return DType::q5_k;
    case GgmlType::q6_k: return DType::q6_k;
    case GgmlType::iq4_nl: return DType::iq4_nl;
    case GgmlType::iq4_xs: return DType::iq4_xs;
  }
  return std::nullopt;
}

const char* ggml_type_name(std::uint32_t ggml_type) {
  // ggml.h's enum ggml_type (4, 5: removed Q4_2/Q4_3; 31-33: removed Q4_0_4_4 ...).
  static constexpr const char* names[] = {
      "F32",    "F16",    "Q4_0",  "Q4_1",    "",      "",        "Q5_0",   "Q5_1",
      "Q8_0",   "Q8_1",   "Q2_K",  "Q3_K",    "Q4_K",  "Q5_K",    "Q6_K",   "Q8_K",
      "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",  "IQ2_S",  "IQ4_XS",
      "I8",     "I16",    "I32",   "I64",     "F64",   "IQ1_M",   "BF16",   "Q4_0_4_4",
      "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0",
  };
  return ggml_type < std::size(names) ? names[ggml_type] : "";
}

GgmlType ggml_from_dtype(DType t) {
  switch (t) {
    case DType::f32: return GgmlType::f32;
    case DType::f16: return GgmlType::f16;
    case DType::bf16: return GgmlType::bf16;
    case DType::q8_0: return GgmlType::q8_0;
    case DType::q4_0: return GgmlType::q4_0;
    case DType::q4_k: return GgmlType::q4_k;
    case DType::q4_1: return GgmlType::q4_1;
    case DType::q5_0: return GgmlType::q5_0;
    case DType::q5_1: return GgmlType::q5_1;
    case DType::q2_k: return GgmlType::q2_k;
    case DType::q3_k: return GgmlType::q3_k;
    case DType::q5_k: return GgmlType::q5_k;
    case DType::q6_k: return GgmlType::q6_k;
    case DType::iq4_nl: return GgmlType::iq4_nl;
    case DType::iq4_xs: return GgmlType::iq4_xs;
  }
  return GgmlType::f32;
}

bool looks_like_gguf(std::span<const std::byte> first_bytes) {
  if (first_bytes.size() < 4) return false;
  std::uint32_t magic;
  std::memcpy(&magic, first_bytes.data(), 4);
  return magic == gguf_magic;
}

Result<GgufFile> parse_gguf(std::span<const std::byte> bytes, std::string label) {
  GgufFile file;
  file.label = std::move(label);
  Cursor cur(bytes, file.label);
  auto magic = cur.read<std::uint32_t>("the magic");
  if (!magic) return magic.error();
  if (*magic != gguf_magic) return cur.error("wrong magic (not a GGUF file)");
  auto version = cur.read<std::uint32_t>("the version");
  if (!version) return version.error();
  if (*version == 0x02000000u || *version == 0x03000000u) return cur.error("big-endian GGUF is not supported");
  if (*version != 2 && *version != 3) {
    return cur.error("unsupported version " + std::to_string(*version) + " (2 and 3 are read)");
  }
  file.version = *version;
  auto n_tensors = cur.read<std::uint64_t>("the tensor count");
  if (!n_tensors) return n_tensors.error();
  auto n_kv = cur.read<std::uint64_t>("the metadata count");
  if (!n_kv) return n_kv.error();
  if (auto ok = read_metadata(cur, file, *n_kv); !ok) return ok.error();
  if (auto ok = read_alignment(cur, file); !ok) return ok.error();
  // A tensor info takes at least 8 (name length) + 4 + 8 + 4 + 8 bytes.
  if (*n_tensors > cur.remaining() / 32) return cur.error("absurd tensor count " + std::to_string(*n_tensors));
  file.tensors.reserve(std::size_t(*n_tensors));
  for (std::uint64_t k = 0; k < *n_tensors; ++k) {
    auto t = read_tensor_info(cur);
    if (!t) return t.error();
    if (!file.tensor_index_.emplace(t->name, file.tensors.size()).second) {
      return cur.error("duplicate tensor name '" + t->name + "'");
    }
    file.tensors.push_back(std::move(*t));
  }
  if (auto ok = place_tensors(cur, file, bytes); !ok) return ok.error();
  return file;
}

Result<GgufFile> read_gguf(const std::filesystem::path& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  auto file = parse_gguf((*mapped)->bytes(), path.string());
  if (!file) return file.error();
  file->storage = *mapped;
  return file;
}

}  // namespace pensieve::model
