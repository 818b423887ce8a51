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
    case ChunkFault::foreign:
      return "foreign";
    case ChunkFault::empty:
      return "empty";
  }
  return "?";
}

void throw_exception_from_error(ChunkError const& e, boost::source_location const&) {
  throw std::runtime_error(std::string(chunk_fault_name(e.fault)) + ": " + e.message);
}

namespace {

// Where the token ids and the namespace go in the header block, and
// whether they fit.
constexpr std::size_t label_offset = sizeof(ChunkHeader);

bool label_fits(std::size_t token_count, std::size_t ns_bytes) {
  return token_count <= (chunk_header_block_bytes - label_offset) / sizeof(std::int32_t) &&
         label_offset + token_count * sizeof(std::int32_t) + ns_bytes <= chunk_header_block_bytes;
}

}  // namespace

ChunkHeader seal_chunk_header(const ChunkExpectation& e, std::uint32_t payload_crc32,
                              std::span<const std::int32_t> tokens, const ChunkLabel& label) {
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
  h.identity = e.identity;
  h.payload_crc32 = payload_crc32;
  h.token_count = std::uint32_t(tokens.size());
  h.tokens_crc32 = tokens_crc(tokens);
  if (!label.ns.empty() && label_fits(tokens.size(), label.ns.size())) {
    h.flags = ChunkHeader::tokens_stored;
    h.block_index = label.block_index;
    h.parent_chain = label.parent_chain;
    h.chain = label.chain;
    h.ns_bytes = std::uint32_t(label.ns.size());
    h.ns_crc32 = crc_of(label.ns.data(), label.ns.size());
  }
  h.header_crc32 = header_crc(h);
  return h;
}

void write_chunk_header_block(std::span<std::byte> block, const ChunkHeader& h,
                              std::span<const std::int32_t> tokens, const ChunkLabel& label) {
  if (block.size() < chunk_header_block_bytes) throw std::invalid_argument("a chunk header block is 4 KiB");
  std::memset(block.data(), 0, chunk_header_block_bytes);
  std::memcpy(block.data(), &h, sizeof h);
  if (!(h.flags & ChunkHeader::tokens_stored)) return;
  if (!tokens.empty()) std::memcpy(block.data() + label_offset, tokens.data(), tokens.size_bytes());
  std::memcpy(block.data() + label_offset + tokens.size_bytes(), label.ns.data(), label.ns.size());
}

ChunkResult<ScannedChunk> scan_chunk_header(std::span<const std::byte> block, const ChunkExpectation& e,
                                            const std::string& name) {
  if (block.size() < chunk_header_block_bytes) {
    return chunk_error(ChunkFault::corrupt, name + " is torn: its header block is cut short");
  }
  ChunkHeader h;
  std::memcpy(&h, block.data(), sizeof h);
  if (h.magic == 0 && h.header_crc32 == 0) return chunk_error(ChunkFault::empty, name + " was never written");
  if (h.magic != ChunkHeader::magic_value || h.header_crc32 != header_crc(h)) {
    return chunk_error(ChunkFault::corrupt, name + ": the chunk header is torn or corrupt");
  }
  if (h.version != ChunkHeader::current_version || h.header_bytes != sizeof(ChunkHeader) || h.slot != e.slot ||
      h.n_layers != e.n_layers || h.layer_bytes != e.layer_bytes || h.payload_bytes != e.payload_bytes ||
      h.identity != e.identity) {
    return chunk_error(ChunkFault::foreign, name + ": a chunk of another model, KV layout or format (version " +
                                                std::to_string(h.version) + ")");
  }
  if (!(h.flags & ChunkHeader::tokens_stored) || h.ns_bytes == 0 || h.token_count == 0 ||
      !label_fits(h.token_count, h.ns_bytes)) {
    return chunk_error(ChunkFault::empty, name + ": a chunk without a label");
  }
  ScannedChunk out;
  out.header = h;
  out.tokens.resize(h.token_count);
  std::memcpy(out.tokens.data(), block.data() + label_offset, out.tokens.size() * sizeof(std::int32_t));
  const std::size_t ns_at = label_offset + out.tokens.size() * sizeof(std::int32_t);
  out.label.ns.assign(reinterpret_cast<const char*>(block.data() + ns_at), h.ns_bytes);
  if (tokens_crc(out.tokens) != h.tokens_crc32 || crc_of(out.label.ns.data(), h.ns_bytes) != h.ns_crc32) {
    return chunk_error(ChunkFault::corrupt, name + ": the token ids or namespace after the header are corrupt");
  }
  out.label.block_index = h.block_index;
  out.label.parent_chain = h.parent_chain;
  out.label.chain = h.chain;
  return out;
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
      h.payload_bytes != e.payload_bytes || h.identity != e.identity) {
    return chunk_error(ChunkFault::corrupt,
                       name + ": the chunk header does not describe this slot's layout and model");
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
