#include "gpu/model/weight_arena.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include <sys/mman.h>

namespace pensieve::model {

namespace {

constexpr std::size_t huge_page_size_bytes = std::size_t(2) << 20;
constexpr std::size_t tensor_alignment_bytes = 64;  // a cache line: rows start where loads want them

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// Every tensor of the model, the embedding only when the output head reads
// it (tied): an untied embedding is read one row per token and gains nothing.
std::vector<Tensor*> tensors_to_place(ModelWeights& w) {
  std::vector<Tensor*> out;
  auto add = [&](Tensor& t) {
    if (t.present() && t.size_bytes > 0) out.push_back(&t);
  };
  if (w.token_embedding.data == w.output.data) add(w.token_embedding);
  add(w.output);
  add(w.output_norm);
  add(w.rope_freqs);
  for (LayerWeights& l : w.layers) {
    for (Tensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.ffn_norm,
                      &l.w_gate, &l.w_up, &l.w_down})
      add(*t);
  }
  return out;
}

// The arena and the loader's storage (the untied embedding, the tokenizer's
// source) kept alive together.
struct PlacedStorage {
  std::shared_ptr<const void> loader;
  std::shared_ptr<WeightArena> arena;
};

double mib(std::size_t bytes) { return double(bytes) / double(1 << 20); }

}  // namespace

Result<std::shared_ptr<WeightArena>> WeightArena::create(std::size_t size_bytes) {
  const std::size_t size = round_up(std::max<std::size_t>(size_bytes, 1), huge_page_size_bytes);
  // Over-map by one huge page and trim, so the region starts 2 MiB aligned.
  const std::size_t mapped = size + huge_page_size_bytes;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail(std::string("cannot map weight memory: ") + std::strerror(errno));
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = round_up(base, huge_page_size_bytes);
  if (aligned > base) ::munmap(p, aligned - base);
  const std::size_t tail = base + mapped - (aligned + size);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  auto* data = reinterpret_cast<std::byte*>(aligned);
  std::shared_ptr<WeightArena> arena(new WeightArena(data, size));
  // Advice only: without THP the copy still works, on small pages.
  (void)::madvise(data, size, MADV_HUGEPAGE);
#if defined(MADV_POPULATE_WRITE)
  // Fault everything in now: out of memory becomes ENOMEM here instead of
  // the OOM killer during the copy. EINVAL: a kernel without it (pre 5.14).
  if (::madvise(data, size, MADV_POPULATE_WRITE) != 0 && errno != EINVAL) {
    return fail(std::string("cannot populate ") + std::to_string(size >> 20) +
                " MiB of weight memory: " + std::strerror(errno));
  }
#endif
  return arena;
}

WeightArena::~WeightArena() { ::munmap(data_, size_bytes_); }

std::size_t WeightArena::huge_page_bytes() const {
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return 0;
  const auto start = reinterpret_cast<std::uintptr_t>(data_);
  std::size_t kib = 0;
  bool inside = false;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::uintmax_t lo = 0, hi = 0;
    if (std::sscanf(line, "%jx-%jx ", &lo, &hi) == 2) {  // a mapping's header line
      inside = lo <= start && start < hi;
      continue;
    }
    std::size_t value = 0;
    if (inside && std::sscanf(line, "AnonHugePages: %zu kB", &value) == 1) {
      kib = value;
      break;
    }
  }
  std::fclose(f);
  return std::min(kib << 10, size_bytes_);
}

std::string WeightPlacement::describe() const {
  char buf[256];
  if (!on_arena) {
    std::snprintf(buf, sizeof buf, "CPU weights: read from the loader's memory (%s)",
                  fallback_reason.c_str());
  } else {
    std::snprintf(buf, sizeof buf,
                  "CPU weights: %.1f MiB copied to anonymous memory (%.1f MiB mapped), %.1f MiB on 2 MiB pages",
                  mib(copied_bytes), mib(arena_bytes), mib(huge_page_bytes));
  }
  return buf;
}

WeightPlacement place_weights_on_huge_pages(ModelWeights& w) {
  WeightPlacement placement;
  const std::vector<Tensor*> tensors = tensors_to_place(w);
  // Each distinct source once (a tied head shares the embedding's bytes).
  std::map<const std::byte*, std::size_t> sizes, offsets;
  for (const Tensor* t : tensors) sizes[t->data] = std::max(sizes[t->data], t->size_bytes);
  std::size_t total = 0;
  for (const auto& [src, size] : sizes) {
    offsets.emplace(src, total);
    total = round_up(total + size, tensor_alignment_bytes);
  }
  if (total == 0) {
    placement.fallback_reason = "no tensors";
    return placement;
  }
  auto arena = WeightArena::create(total);
  if (!arena) {
    placement.fallback_reason = arena.error().message;
    return placement;
  }
  std::byte* base = (*arena)->data();
  for (const auto& [src, size] : sizes) std::memcpy(base + offsets.at(src), src, size);
  for (Tensor* t : tensors) t->data = base + offsets.at(t->data);
  // Read-only from here on: a stray write through a weight view faults.
  (void)::mprotect(base, (*arena)->size_bytes(), PROT_READ);
  placement.on_arena = true;
  placement.copied_bytes = total;
  placement.arena_bytes = (*arena)->size_bytes();
  placement.huge_page_bytes = (*arena)->huge_page_bytes();
  w.storage = std::make_shared<PlacedStorage>(PlacedStorage{std::move(w.storage), std::move(*arena)});
  return placement;
}

}  // namespace pensieve::model
