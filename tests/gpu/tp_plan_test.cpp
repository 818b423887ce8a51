// The decisions of the device backends' tensor-parallel pass
// (gpu/model/tp_plan.hpp), run over HostCollective ranks on the CPU: the
// residual rule (rank 0 adds, the others overwrite, then one in-place
// all-reduce) gives the unsharded product added to the residual on every
// rank; the logit copies lay the gathered slices out as the whole vocabulary;
// one device per rank.
#include "gpu/model/host_collective.hpp"
#include "gpu/model/tp_plan.hpp"
#include "gpu/model/tp_rank_threads.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace pensieve;
using namespace pensieve::model;

namespace {

std::vector<float> random_floats(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace

TEST_CASE("the residual rule plus one all-reduce gives x + the whole row-parallel product on every rank", "[tp]") {
  std::mt19937_64 rng(41);
  const std::int32_t rows = 3, in = 12, out = 5;
  const auto a = random_floats(std::size_t(rows * in), rng);  // activations [rows][in]
  const auto w = random_floats(std::size_t(out * in), rng);   // weights [out][in]
  const auto x0 = random_floats(std::size_t(rows * out), rng);
  for (std::int32_t ranks : {1, 2, 3, 4}) {
    // The unsharded result in F64: x + a w^T.
    std::vector<double> want(x0.begin(), x0.end());
    for (std::int32_t r = 0; r < rows; ++r)
      for (std::int32_t o = 0; o < out; ++o)
        for (std::int32_t i = 0; i < in; ++i) want[std::size_t(r * out + o)] += double(a[std::size_t(r * in + i)]) * w[std::size_t(o * in + i)];
    HostCollectiveGroup group(ranks);
    TpRankThreads threads(ranks);
    std::vector<std::vector<float>> x(std::size_t(ranks), x0);
    threads.run([&](std::int32_t rank) {
      const TpRank tp{rank, ranks};
      const std::int32_t cols = in / ranks + (rank < in % ranks ? 1 : 0);
      std::int32_t begin = 0;
      for (std::int32_t q = 0; q < rank; ++q) begin += in / ranks + (q < in % ranks ? 1 : 0);
      auto& xr = x[std::size_t(rank)];
      const float beta = tp_residual_beta(tp);
      for (std::int32_t r = 0; r < rows; ++r) {
        for (std::int32_t o = 0; o < out; ++o) {
          float partial = 0.0f;  // this rank's columns of the product
          for (std::int32_t i = begin; i < begin + cols; ++i) partial += a[std::size_t(r * in + i)] * w[std::size_t(o * in + i)];
          float& y = xr[std::size_t(r * out + o)];
          y = beta * y + partial;
        }
      }
      REQUIRE(group.rank(rank).all_reduce_sum(xr.data(), xr.size()).has_value());
    });
    INFO(ranks << " ranks");
    for (std::int32_t r = 0; r < ranks; ++r) CHECK(x[std::size_t(r)] == x[0]);  // the same bits everywhere
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(std::fabs(double(x[0][i]) - want[i]) < 1e-5);
  }
  CHECK(tp_residual_beta({0, 2}) == 1.0f);
  CHECK(tp_residual_beta({1, 2}) == 0.0f);
}

TEST_CASE("the logit copies lay the gathered vocabulary slices out as whole rows, padding dropped", "[tp]") {
  for (const auto& [ranks, vocab] : {std::pair{1, 7}, std::pair{2, 10}, std::pair{3, 10}, std::pair{4, 5}, std::pair{4, 13}}) {
    const std::int32_t rows = 3;
    // Rank r's slice in the all-gather's [rank][row][slice] layout: the value
    // is 1000 * row + token, or -1 in the padding past the vocabulary.
    const std::int32_t slice = TpRank{0, ranks}.vocab_slice(vocab);
    std::vector<float> gathered(std::size_t(ranks * rows * slice), -1.0f);
    for (std::int32_t r = 0; r < ranks; ++r) {
      const TpRank tp{r, ranks};
      for (std::int32_t row = 0; row < rows; ++row)
        for (std::int32_t j = 0; j < tp.vocab_rows(vocab); ++j)
          gathered[std::size_t((r * rows + row) * slice + j)] = float(1000 * row + tp.vocab_begin(vocab) + j);
    }
    std::vector<float> logits(std::size_t(rows * vocab), -2.0f);
    const auto copies = tp_logit_copies(ranks, vocab, rows);
    apply_logit_copies(copies, gathered.data(), logits.data());
    INFO(ranks << " ranks, vocabulary " << vocab);
    for (std::int32_t row = 0; row < rows; ++row)
      for (std::int32_t t = 0; t < vocab; ++t) CHECK(logits[std::size_t(row * vocab + t)] == float(1000 * row + t));
    std::size_t width = 0;
    for (const auto& c : copies) width += c.width;
    CHECK(width == std::size_t(vocab));  // every token once
  }
  // 4 ranks of a 5-token vocabulary: slices of 2, the last rank has none.
  CHECK(tp_logit_copies(4, 5, 2).size() == 3);
  CHECK(tp_logit_copies(2, 10, 0).empty());
}

TEST_CASE("tensor-parallel ranks take one device each, and more ranks than devices is a clear error", "[tp]") {
  CHECK(tp_devices(1, 1).value() == std::vector<int>{0});
  CHECK(tp_devices(2, 8).value() == std::vector<int>{0, 1});
  const auto two_on_one = tp_devices(2, 1);
  REQUIRE_FALSE(two_on_one.has_value());
  CHECK(two_on_one.error().message ==
        "--tp 2 --backend cuda needs one CUDA device per rank; this machine has 1 (NCCL refuses two ranks of one "
        "communicator on one device)");
  CHECK_FALSE(tp_devices(0, 4).has_value());
}
