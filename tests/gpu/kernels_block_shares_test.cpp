// BlockShares: the lane kernels' per-block prefetch shares, stepped without
// divisions, must be the shares the division formula gives, whole and in
// order, for every split (fewer units than parts, exact multiples, one part).
#include "gpu/kernels/cpu/block_shares.hpp"

#include <catch2/catch.hpp>

#include <cstddef>

using pensieve::kernels::cpu::BlockShares;

TEST_CASE("BlockShares steps the division formula's shares", "[kernels][prefetch]") {
  for (std::size_t parts = 1; parts <= 40; ++parts) {
    for (std::size_t total = 0; total <= 300; total += (total < 50 ? 1 : 7)) {
      BlockShares shares(total, parts);
      std::size_t sum = 0;
      for (std::size_t p = 0; p < parts; ++p) {
        const std::size_t want = total * (p + 1) / parts - total * p / parts;
        const std::size_t got = shares.next();
        INFO("total " << total << " parts " << parts << " part " << p);
        REQUIRE(got == want);
        sum += got;
      }
      REQUIRE(sum == total);
    }
  }
}

TEST_CASE("BlockShares of nothing or over no parts is empty, in a constant expression too",
          "[kernels][prefetch]") {
  BlockShares none(0, 5);
  for (int p = 0; p < 5; ++p) REQUIRE(none.next() == 0);
  static_assert(BlockShares(7, 0).next() == 0);
  static_assert(BlockShares(10, 3).next() == 3);
}
