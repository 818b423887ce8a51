#include "gpu/formats/safetensors_writer.hpp"

#include <boost/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace pensieve::model {

std::vector<std::byte> serialize_safetensors(const std::vector<SafetensorsOut>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  boost::json::object header;
  if (!metadata.empty()) {
    boost::json::object meta;
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    boost::json::array shape;
    for (auto d : t.shape) shape.push_back(d);
    header[t.name] = boost::json::object{{"dtype", dtype_name(t.dtype)},
                                         {"shape", std::move(shape)},
                                         {"data_offsets", boost::json::array{offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = boost::json::serialize(header);
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + text.size());
  const std::uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  out.reserve(out.size() + offset);
  for (const auto& t : tensors) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

Result<void> write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsOut>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  const std::vector<std::byte> bytes = serialize_safetensors(tensors, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fail(path.string() + ": cannot create: " + std::strerror(errno));
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  out.flush();
  if (!out) return fail(path.string() + ": write failed: " + std::strerror(errno));
  return {};
}

}  // namespace pensieve::model
