#include "gpu/kv/chunk_header.hpp"

#include <zlib.h>

#include <cstring>
#include <stdexcept>

namespace pensieve::kv {
namespace {

std::uint32_t crc_of(const void* data, std::size_t bytes) {
  return static_cast<std::uint32_t>(crc32_z(0, static_cast<const Bytef*>(data), bytes));
}

std::uint32_t header_crc(const ChunkHeader& h) {
  return crc_of(&h, offsetof(ChunkHeader, header_crc32));
}

std::uint32_t tokens_crc(std::span<const std::int32_t> tokens) {
  return crc_of(tokens.data(), tokens.size_bytes());
}

ChunkError chunk_error(ChunkFault fault, std::string message) {
  return ChunkError{fault, std::move(message)};
}

}  // namespace

const char* chunk_fault_name(ChunkFault fault) {
  switch (fault) {
    case ChunkFault::invalid:
      return "invalid";
    case ChunkFault::io:
      return "io";
    case ChunkFault::corrupt:
      return "corrupt";
    case ChunkFault::stale:
      return "stale";
    case ChunkFault::wrong_tokens:
      return "wrong_tokens";
  }
  return "?";
}

void throw_exception_from_error(ChunkError const& e, boost::source_location const&) {
  throw std::runtime_error(std::string(chunk_fault_name(e.fault)) + ": " + e.message);
}

ChunkHeader seal_chunk_header(const ChunkExpectation& e, std::uint32_t payload_crc32,
                              std::span<const std::int32_t> tokens) {
  ChunkHeader h;
  h.magic = ChunkHeader::magic_value;
  h.version = ChunkHeader::current_version;
  h.header_bytes = sizeof(ChunkHeader);
  h.slot = e.slot;
  h.n_layers = e.n_layers;
  h.layer_bytes = e.layer_bytes;
  h.payload_bytes = e.payload_bytes;
  h.run_id = e.run_id;
  h.generation = e.generation;
  h.payload_crc32 = payload_crc32;
  h.token_count = std::uint32_t(tokens.size());
  h.tokens_crc32 = tokens_crc(tokens);
  h.header_crc32 = header_crc(h);
  return h;
}

ChunkResult<ChunkHeader> check_chunk_slot(std::span<const std::byte> read,
                                          const ChunkExpectation& e,
                                          std::span<const std::int32_t> tokens,
                                          const std::string& name) {
  if (read.size() < chunk_header_block_bytes ||
      read.size() - chunk_header_block_bytes < e.payload_bytes) {
    return chunk_error(ChunkFault::corrupt, name + " is torn: the file ends " +
                                                std::to_string(read.size()) + " bytes into it");
  }
  ChunkHeader h;
  std::memcpy(&h, read.data(), sizeof h);
  if (h.magic != ChunkHeader::magic_value || h.header_crc32 != header_crc(h)) {
    return chunk_error(ChunkFault::corrupt, name + ": the chunk header is torn or corrupt");
  }
  if (h.version != ChunkHeader::current_version || h.header_bytes != sizeof(ChunkHeader) ||
      h.slot != e.slot || h.n_layers != e.n_layers || h.layer_bytes != e.layer_bytes ||
      h.payload_bytes != e.payload_bytes) {
    return chunk_error(ChunkFault::corrupt,
                       name + ": the chunk header does not describe this slot's layout");
  }
  if (h.run_id != e.run_id || h.generation != e.generation) {
    return chunk_error(ChunkFault::stale, name + ": holds write " + std::to_string(h.generation) +
                                              ", not the last one (" +
                                              std::to_string(e.generation) + ")");
  }
  if (h.token_count != tokens.size() || h.tokens_crc32 != tokens_crc(tokens)) {
    return chunk_error(ChunkFault::wrong_tokens, name + ": the chunk covers other tokens (" +
                                                     std::to_string(h.token_count) +
                                                     " tokens, digest differs)");
  }
  return h;
}

}  // namespace pensieve::kv
