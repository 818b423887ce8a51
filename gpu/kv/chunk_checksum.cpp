#include "gpu/kv/chunk_checksum.hpp"

#include <zlib.h>

#include <cstring>
#include <nmmintrin.h>

namespace pensieve::kv {
namespace {

constexpr std::size_t block_bytes = 64 * 1024;
constexpr std::size_t lanes = 4;
constexpr std::size_t lane_bytes = block_bytes / lanes;

std::uint64_t load(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

__attribute__((target("sse4.2"))) std::uint32_t crc32c_bytes(std::uint32_t crc, const unsigned char* p,
                                                            std::size_t n) {
  std::uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) c = _mm_crc32_u64(c, load(p));
  auto c32 = std::uint32_t(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

__attribute__((target("sse4.2"))) std::uint32_t crc32c_block(std::uint32_t state, const unsigned char* p) {
  std::uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  for (std::size_t i = 0; i < lane_bytes; i += 8) {
    c0 = _mm_crc32_u64(c0, load(p + i));
    c1 = _mm_crc32_u64(c1, load(p + lane_bytes + i));
    c2 = _mm_crc32_u64(c2, load(p + 2 * lane_bytes + i));
    c3 = _mm_crc32_u64(c3, load(p + 3 * lane_bytes + i));
  }
  state = _mm_crc32_u32(state, std::uint32_t(c0));
  state = _mm_crc32_u32(state, std::uint32_t(c1));
  state = _mm_crc32_u32(state, std::uint32_t(c2));
  return _mm_crc32_u32(state, std::uint32_t(c3));
}

std::uint32_t zlib_crc(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  return static_cast<std::uint32_t>(crc32_z(crc, p, n));
}

std::uint32_t zlib_block(std::uint32_t state, const unsigned char* p) {
  std::uint32_t lane_crc[lanes];
  for (std::size_t l = 0; l < lanes; ++l) lane_crc[l] = zlib_crc(0, p + l * lane_bytes, lane_bytes);
  return zlib_crc(state, reinterpret_cast<const unsigned char*>(lane_crc), sizeof lane_crc);
}

}  // namespace

std::uint32_t chunk_checksum(std::uint32_t state, const void* data, std::size_t bytes) {
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  const auto* p = static_cast<const unsigned char*>(data);
  for (; bytes >= block_bytes; bytes -= block_bytes, p += block_bytes) {
    state = hardware ? crc32c_block(state, p) : zlib_block(state, p);
  }
  if (bytes > 0) {
    const std::uint32_t tail = hardware ? crc32c_bytes(0, p, bytes) : zlib_crc(0, p, bytes);
    state = hardware ? crc32c_bytes(state, reinterpret_cast<const unsigned char*>(&tail), sizeof tail)
                     : zlib_crc(state, reinterpret_cast<const unsigned char*>(&tail), sizeof tail);
  }
  return state;
}

}  // namespace pensieve::kv
