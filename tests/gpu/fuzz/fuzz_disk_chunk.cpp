// libFuzzer target: any bytes as what a read of a disk KV slot returned,
// through the check DiskTierFile::read makes before it copies a chunk out
// (gpu/kv/chunk_header.hpp), then the payload checksum over the layers as
// the read computes it. The first input byte picks how much of the header
// the harness repairs after mutation (bit 0: its checksum; bit 1 as well:
// the layout and write fields the store expects), so the fuzzer gets past
// the header checksum to the later checks. A chunk the check accepts must
// be the one the store expects. The same bytes go through the start-up
// scan (scan_chunk_header): a chunk it keeps must be of the store's layout
// and model, with exactly the token ids and namespace its header counts.
// ASan and UBSan catch anything else.
#include "gpu/kv/chunk_checksum.hpp"
#include "gpu/kv/chunk_header.hpp"
#include "tests/gpu/fuzz/seed_hook.hpp"

#include <zlib.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace pensieve::kv;

void check(bool ok) {
  if (!ok) std::abort();  // a broken invariant: libFuzzer keeps the input
}

// A store of two 100-byte layers, reading slot 3 after its fifth write.
const ChunkExpectation expected{3, 2, 100, 200, 0x1234'5678'9abc'def0ull, 5};
const std::array<std::int32_t, 3> tokens{1, 15043, 2};

void repair(std::vector<std::byte>& slot, std::uint8_t mode) {
  if (slot.size() < sizeof(ChunkHeader)) return;
  ChunkHeader h;
  std::memcpy(&h, slot.data(), sizeof h);
  if (mode & 2) {
    const ChunkHeader sealed = seal_chunk_header(expected, h.payload_crc32, tokens);
    h.magic = sealed.magic;
    h.version = sealed.version;
    h.header_bytes = sealed.header_bytes;
    h.slot = sealed.slot;
    h.n_layers = sealed.n_layers;
    h.layer_bytes = sealed.layer_bytes;
    h.payload_bytes = sealed.payload_bytes;
    h.run_id = sealed.run_id;
    h.generation = sealed.generation;
    h.identity = sealed.identity;
  }
  h.header_crc32 = std::uint32_t(crc32_z(0, reinterpret_cast<const Bytef*>(&h), offsetof(ChunkHeader, header_crc32)));
  std::memcpy(slot.data(), &h, sizeof h);
}

void scan(const std::vector<std::byte>& slot) {
  const auto found = scan_chunk_header(slot, expected, "fuzz slot");
  if (!found) {
    check(!found.error().message.empty());
    return;
  }
  const ChunkHeader& h = found->header;
  check(h.slot == expected.slot && h.identity == expected.identity && h.payload_bytes == expected.payload_bytes);
  check(found->tokens.size() == h.token_count && found->label.ns.size() == h.ns_bytes && !found->label.ns.empty());
  check(sizeof(ChunkHeader) + found->tokens.size() * 4 + found->label.ns.size() <= chunk_header_block_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::vector<std::byte> slot(size - 1);  // a private copy (ASan redzone)
  if (size > 1) std::memcpy(slot.data(), data + 1, size - 1);
  if (data[0] & 1) repair(slot, data[0]);
  scan(slot);
  const auto checked = check_chunk_slot(slot, expected, tokens, "fuzz slot");
  if (!checked) {
    check(!checked.error().message.empty() && checked.error().unusable_chunk());
    return 0;
  }
  const ChunkHeader& h = *checked;
  check(h.slot == expected.slot && h.generation == expected.generation && h.run_id == expected.run_id);
  check(h.n_layers == expected.n_layers && h.payload_bytes == expected.payload_bytes);
  check(h.token_count == tokens.size());
  check(slot.size() >= chunk_header_block_bytes + expected.payload_bytes);
  std::uint32_t crc = 0;
  for (std::uint32_t l = 0; l < h.n_layers; ++l) {
    crc = chunk_checksum(crc, slot.data() + chunk_header_block_bytes + l * h.layer_bytes, h.layer_bytes);
  }
  volatile bool intact = crc == h.payload_crc32;
  (void)intact;
  return 0;
}

// Writes the seed corpus into dir: the slot as the store writes it, torn,
// stale, for other tokens, and one with its payload flipped.
int pensieve_fuzz_write_seeds(const std::string& dir) {
  auto write = [&](const std::string& name, char mode, const std::vector<std::byte>& bytes) {
    std::ofstream f(dir + "/" + name, std::ios::binary);
    f.put(mode);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  };
  std::vector<std::byte> slot(chunk_header_block_bytes + expected.payload_bytes);
  for (std::size_t i = chunk_header_block_bytes; i < slot.size(); ++i) slot[i] = std::byte(i * 7);
  std::uint32_t crc = 0;
  for (std::uint32_t l = 0; l < expected.n_layers; ++l) {
    crc = chunk_checksum(crc, slot.data() + chunk_header_block_bytes + l * expected.layer_bytes,
                         expected.layer_bytes);
  }
  const ChunkLabel label{"tenant\x1fsalt", 4, 0x1111, 0x2222};
  const ChunkHeader labelled = seal_chunk_header(expected, crc, tokens, label);
  write_chunk_header_block(std::span(slot.data(), chunk_header_block_bytes), labelled, tokens, label);
  write("labelled", 0, slot);
  const ChunkHeader h = seal_chunk_header(expected, crc, tokens);
  write_chunk_header_block(std::span(slot.data(), chunk_header_block_bytes), h, tokens, {});
  write("intact", 0, slot);
  write("intact-repaired", 3, slot);
  std::vector<std::byte> torn(slot.begin(), slot.end() - 50);
  write("torn", 0, torn);
  ChunkExpectation earlier = expected;
  earlier.generation = 4;
  const ChunkHeader stale = seal_chunk_header(earlier, crc, tokens);
  std::vector<std::byte> s = slot;
  std::memcpy(s.data(), &stale, sizeof stale);
  write("stale", 0, s);
  const std::array<std::int32_t, 2> other{1, 2};
  const ChunkHeader wrong = seal_chunk_header(expected, crc, other);
  std::memcpy(s.data(), &wrong, sizeof wrong);
  write("wrong-tokens", 0, s);
  std::vector<std::byte> flipped = slot;
  flipped[chunk_header_block_bytes + 17] ^= std::byte{1};
  write("flipped", 0, flipped);
  return 0;
}
