#pragma once
// Multi-token paged attention on the CPU: the reference for the CUDA kernels
// and the CPU backend's kernel. Prefill spans and decode rows of a ragged
// batch in one call, causal over each sequence's new tokens, GQA, F32 online
// softmax over fixed kv tiles (plan.kv_tile_tokens) merged in KV order.
// Batch-invariant: a query row's output bits depend only on its own query,
// its sequence's K/V and the tile size: not on the rest of the batch, on how
// many of its sequence's tokens are new, on the block layout, on the plan's
// decode strategy or on the number of threads.
//
// Usage: plan = plan_paged_attention(shape, n_kv_heads, options) once per
// batch (shared by every layer), then paged_attention(params, plan, ...) per
// layer. Q and out are F32; the cache may be F32, F16, BF16 or Q8_0, each
// kv tile widened to F32 first (Q8_0: attention_widen_q8.hpp, dispatched at
// run time), so the arithmetic and its batch invariance are the same for all.
#include "gpu/kernels/cpu/attention_work_runner.hpp"
#include "gpu/kernels/cpu/attention_workspace.hpp"
#include "gpu/kernels/cpu/paged_attention_params.hpp"
#include "gpu/kernels/cpu/paged_attention_plan.hpp"

namespace pensieve::kernels::cpu {

// Checks the params against each other and the plan (asserts on a mismatch:
// a caller's bug), then runs.
void paged_attention(const PagedAttentionParams& params, const AttentionPlan& plan,
                     AttentionWorkspace& workspace, WorkRunner& runner);

}  // namespace pensieve::kernels::cpu
