#include "gpu/kernels/cpu/attention_contiguous.hpp"

#include "gpu/kernels/cpu/attention_core.hpp"

#include <stdexcept>

namespace pensieve::kernels::cpu {
namespace {

struct ContiguousSource {
  const float* k;
  const float* v;
  const std::int64_t* kv_start;
  std::int64_t token_stride;
  std::int32_t head_dim;

  void rows(std::int32_t seq, std::int32_t kv_head, std::int32_t begin, std::int32_t end,
            const float** keys, const float** values, float*) const {
    const std::int64_t base =
        (kv_start[seq] + begin) * token_stride + std::int64_t(kv_head) * head_dim;
    for (std::int32_t j = 0; j < end - begin; ++j) {
      keys[j] = k + base + j * token_stride;
      values[j] = v + base + j * token_stride;
    }
  }
};

}  // namespace

void contiguous_attention(const ContiguousAttentionParams& p, const AttentionPlan& plan,
                          AttentionWorkspace& workspace, WorkRunner& runner) {
  if (p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0) {
    throw std::invalid_argument("contiguous_attention: n_heads must be a multiple of n_kv_heads");
  }
  AttentionCoreArgs args;
  args.q = p.q;
  args.out = p.out;
  args.q_start = p.q_start;
  args.context_tokens = p.context_tokens;
  args.n_heads = p.n_heads;
  args.n_kv_heads = p.n_kv_heads;
  args.head_dim = p.head_dim;
  args.scale = p.softmax_scale;
  args.window = p.sliding_window;
  args.softcap = p.logit_softcap;
  const ContiguousSource src{p.k, p.v, p.kv_start, std::int64_t(p.n_kv_heads) * p.head_dim,
                             p.head_dim};
  run_attention_plan(args, plan, src, workspace, runner);
}

}  // namespace pensieve::kernels::cpu
