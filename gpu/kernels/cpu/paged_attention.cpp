#include "gpu/kernels/cpu/paged_attention.hpp"

#include "gpu/kernels/cpu/attention_core.hpp"
#include "gpu/kernels/cpu/attention_widen.hpp"
#include "gpu/kernels/cpu/attention_widen_q8.hpp"
#include "gpu/kv/fp8_kv_row.hpp"

#include <cassert>
#include <stdexcept>

namespace pensieve::kernels::cpu {
namespace {

// K/V rows through the block table: runs of consecutive slots in one block.
struct PagedSource {
  kv::PagedKvView kv;
  const std::int32_t* block_table;
  std::int32_t max_blocks_per_seq;
  WidenQ8Fn widen_q8;  // q8_0 pools: dequantises a head's row

  // f(pos, block, in_block, run) for each run of keys [begin, end) of
  // sequence seq that lie in one block.
  template <class F>
  void for_each_run(std::int32_t seq, std::int32_t begin, std::int32_t end, const F& f) const {
    const std::int32_t bt = kv.block_tokens;
    const std::int32_t* table = block_table + std::int64_t(seq) * max_blocks_per_seq;
    for (std::int32_t pos = begin; pos < end;) {
      const std::int32_t in_block = pos % bt, run = std::min(end - pos, bt - in_block);
      f(pos, table[pos / bt], in_block, run);
      pos += run;
    }
  }

  // An F16 pool's rows where they are: the kernels widen each element as they load it.
  bool rows_f16(std::int32_t seq, std::int32_t kv_head, std::int32_t begin, std::int32_t end,
                const std::uint16_t** keys, const std::uint16_t** values) const {
    if (kv.dtype != kv::KvDType::f16) return false;
    const std::int64_t stride = kv.token_stride();
    const auto* base = static_cast<const std::uint16_t*>(kv.data);
    for_each_run(seq, begin, end, [&](std::int32_t pos, std::int32_t block, std::int32_t in_block,
                                      std::int32_t run) {
      const std::uint16_t* k = base + kv.offset(block, 0, in_block, kv_head);
      const std::uint16_t* v = base + kv.offset(block, 1, in_block, kv_head);
      for (std::int32_t i = 0; i < run; ++i) {
        keys[pos - begin + i] = k + i * stride;
        values[pos - begin + i] = v + i * stride;
      }
    });
    return true;
  }

  void rows(std::int32_t seq, std::int32_t kv_head, std::int32_t begin, std::int32_t end,
            const float** keys, const float** values, float* converted) const {
    const std::int32_t hd = kv.head_dim;
    const std::int64_t stride = kv.token_stride();
    float* widened_v = converted + std::int64_t(end - begin) * hd;
    for_each_run(seq, begin, end, [&](std::int32_t pos, std::int32_t block, std::int32_t in_block,
                                      std::int32_t run) {
      const std::int64_t k_off = kv.offset(block, 0, in_block, kv_head),
                         v_off = kv.offset(block, 1, in_block, kv_head);
      for (std::int32_t i = 0; i < run; ++i) {
        const std::int32_t j = pos - begin + i;
        if (kv::kv_dtype_is_blocked(kv.dtype)) {
          const auto* base = static_cast<const std::byte*>(kv.data);
          const std::int64_t first = std::int64_t(kv_head) * hd;
          const WidenQ8Fn widen = kv.dtype == kv::KvDType::q8_0 ? widen_q8 : kv::widen_kv_row_fp8;
          widen(base + kv.row_byte_offset(block, 0, in_block + i), first, hd, converted + std::int64_t(j) * hd);
          widen(base + kv.row_byte_offset(block, 1, in_block + i), first, hd, widened_v + std::int64_t(j) * hd);
          keys[j] = converted + std::int64_t(j) * hd;
          values[j] = widened_v + std::int64_t(j) * hd;
        } else if (kv.dtype == kv::KvDType::f32) {
          keys[j] = static_cast<const float*>(kv.data) + k_off + i * stride;
          values[j] = static_cast<const float*>(kv.data) + v_off + i * stride;
        } else {
          const auto* base = static_cast<const std::uint16_t*>(kv.data);
          widen_row(base + k_off + i * stride, kv.dtype, hd, converted + std::int64_t(j) * hd);
          widen_row(base + v_off + i * stride, kv.dtype, hd, widened_v + std::int64_t(j) * hd);
          keys[j] = converted + std::int64_t(j) * hd;
          values[j] = widened_v + std::int64_t(j) * hd;
        }
      }
    });
  }
};

}  // namespace

void paged_attention(const PagedAttentionParams& p, const AttentionPlan& plan,
                     AttentionWorkspace& workspace, WorkRunner& runner) {
  if (p.q_dtype != kv::KvDType::f32)
    throw std::invalid_argument("cpu paged_attention: q and out must be F32");
  if (p.kv.n_kv_heads <= 0 || p.n_heads % p.kv.n_kv_heads != 0) {
    throw std::invalid_argument("cpu paged_attention: n_heads must be a multiple of n_kv_heads");
  }
  assert(plan.num_seqs == p.num_seqs && "paged_attention: the plan is for another batch");
  AttentionCoreArgs args;
  args.q = static_cast<const float*>(p.q);
  args.out = static_cast<float*>(p.out);
  args.q_start = p.q_start;
  args.context_tokens = p.context_tokens;
  args.n_heads = p.n_heads;
  args.n_kv_heads = p.kv.n_kv_heads;
  args.head_dim = p.kv.head_dim;
  args.scale = p.softmax_scale;
  args.window = p.sliding_window;
  args.softcap = p.logit_softcap;
  run_attention_plan(args, plan, PagedSource{p.kv, p.block_table, p.max_blocks_per_seq, widen_q8_0_fn()}, workspace,
                     runner);
}

}  // namespace pensieve::kernels::cpu
