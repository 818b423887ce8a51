#pragma once
// Weights on transparent huge pages for the CPU forward pass.
//
// A decode step streams every weight once; from a file mapping (4 KiB pages)
// each core pays a TLB miss every 4 KiB, and the hardware prefetchers stop at
// every page boundary. Copying the tensors into one anonymous region, 2 MiB
// aligned and advised MADV_HUGEPAGE, lets a core stream at the rate of the
// machine's bandwidth probe (which reads 2 MiB pages). The copy holds the
// same bytes, so results are unchanged bit for bit.
//
// WeightArena owns the anonymous mapping (unmapped when the last ModelWeights
// that points into it goes). Immutable after placement: read from any thread.
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace pensieve::model {

class WeightArena {
 public:
  // Maps `size_bytes` (rounded up to 2 MiB) of anonymous memory, advised
  // MADV_HUGEPAGE and populated up front, so running out of memory is an
  // Error here rather than a fault later.
  static Result<std::shared_ptr<WeightArena>> create(std::size_t size_bytes);

  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;
  ~WeightArena();

  std::byte* data() const { return data_; }
  std::size_t size_bytes() const { return size_bytes_; }
  // Bytes of the region the kernel backs with huge pages (AnonHugePages of
  // /proc/self/smaps); 0 when it cannot tell.
  std::size_t huge_page_bytes() const;

 private:
  WeightArena(std::byte* data, std::size_t size_bytes) : data_(data), size_bytes_(size_bytes) {}

  std::byte* data_;
  std::size_t size_bytes_;
};

// What place_weights_on_huge_pages() did, for the load log.
struct WeightPlacement {
  bool on_arena = false;         // false: the weights stay where the loader put them
  std::size_t copied_bytes = 0;  // tensor bytes copied into the arena
  std::size_t arena_bytes = 0;   // the mapping, 2 MiB granular
  std::size_t huge_page_bytes = 0;
  std::string fallback_reason;   // why not, when !on_arena

  // One line: "CPU weights: 1205.2 MiB copied to anonymous memory, 1204.0 MiB on 2 MiB pages".
  std::string describe() const;
};

// Copies every tensor of `w` (each distinct data pointer once: a tied output
// stays shared with the embedding) into a new WeightArena and points the
// tensors at the copies; w.storage then owns the arena. When the arena cannot
// be made (no memory), `w` is left as it was and the reason is returned in
// the placement: never an error.
WeightPlacement place_weights_on_huge_pages(ModelWeights& w);

}  // namespace pensieve::model
