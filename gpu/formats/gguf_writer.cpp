#include "gpu/formats/gguf_writer.hpp"

#include "gpu/formats/gguf_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace pensieve::model {

namespace {

class Sink {
 public:
  explicit Sink(std::vector<std::byte>& out) : out_(out) {}

  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out_.insert(out_.end(), p, p + sizeof v);
  }
  void put_string(const std::string& s) {
    put<std::uint64_t>(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
  }
  void put_bytes(const std::vector<std::byte>& b) { out_.insert(out_.end(), b.begin(), b.end()); }

  void put_value(const GgufValue& v) {
    put<std::uint32_t>(std::uint32_t(v.type));
    switch (v.type) {
      case GgufType::string: put_string(v.s); break;
      case GgufType::array:
        put<std::uint32_t>(std::uint32_t(v.elem_type));
        put<std::uint64_t>(v.count);
        if (v.elem_type == GgufType::string) {
          for (const auto& s : v.strings) put_string(s);
        } else {
          put_bytes(v.raw);
        }
        break;
      case GgufType::f32: put<float>(float(v.f)); break;
      case GgufType::f64: put<double>(v.f); break;
      default: {
        // Integers and bool: the low bytes (two's complement for the signed types).
        const bool is_signed = v.type == GgufType::i8 || v.type == GgufType::i16 ||
                               v.type == GgufType::i32 || v.type == GgufType::i64;
        const std::uint64_t bits = is_signed ? std::uint64_t(v.i) : v.u;
        const auto* p = reinterpret_cast<const std::byte*>(&bits);
        out_.insert(out_.end(), p, p + gguf_scalar_bytes(v.type));
      }
    }
  }

 private:
  std::vector<std::byte>& out_;
};

std::uint64_t align_up(std::uint64_t n, std::uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

Result<void> GgufWriter::add_tensor(std::string name, DType dtype, std::vector<std::int64_t> ne,
                                    std::vector<std::byte> data) {
  if (ne.empty() || ne.size() > gguf_max_dims) return fail("gguf writer: " + name + ": 1 to 4 dimensions");
  std::int64_t rows = 1;
  for (std::size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  if (ne[0] % dtype_block_elems(dtype) != 0 || dtype_row_bytes(dtype, ne[0]) * std::size_t(rows) != data.size()) {
    return fail("gguf writer: " + name + ": data size does not match its shape and type");
  }
  tensors_.push_back({std::move(name), dtype, std::move(ne), std::move(data)});
  return {};
}

std::vector<std::byte> GgufWriter::header_and_index() const {
  std::vector<std::byte> out;
  Sink sink(out);
  sink.put<std::uint32_t>(gguf_magic);
  sink.put<std::uint32_t>(3);
  sink.put<std::uint64_t>(tensors_.size());
  sink.put<std::uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    sink.put_string(key);
    sink.put_value(value);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    sink.put_string(t.name);
    sink.put<std::uint32_t>(std::uint32_t(t.ne.size()));
    for (auto n : t.ne) sink.put<std::uint64_t>(std::uint64_t(n));
    sink.put<std::uint32_t>(std::uint32_t(ggml_from_dtype(t.dtype)));
    sink.put<std::uint64_t>(offset);
    offset = align_up(offset + t.data.size(), alignment_);
  }
  out.resize(align_up(out.size(), alignment_), std::byte{0});
  return out;
}

std::vector<std::byte> GgufWriter::serialize() const {
  std::vector<std::byte> out = header_and_index();
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align_up(out.size(), alignment_), std::byte{0});
  }
  return out;
}

Result<void> GgufWriter::write(const std::filesystem::path& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fail(path.string() + ": cannot create: " + std::strerror(errno));
  auto put = [&](const std::vector<std::byte>& b) {
    out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  };
  const std::vector<std::byte> head = header_and_index();
  put(head);
  const std::vector<std::byte> zeros(alignment_, std::byte{0});
  for (const auto& t : tensors_) {
    put(t.data);
    const std::size_t pad = align_up(t.data.size(), alignment_) - t.data.size();
    out.write(reinterpret_cast<const char*>(zeros.data()), std::streamsize(pad));
  }
  out.flush();
  if (!out) return fail(path.string() + ": write failed: " + std::strerror(errno));
  return {};
}

}  // namespace pensieve::model
