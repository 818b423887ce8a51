#pragma once
// One model of the benchmark: generate it, load it, time a prefill and a run
// of decode steps on the CPU forward pass, and count the bytes and FLOPs
// those steps need. Runs on the calling thread (the forward pass brings its
// own worker threads).
#include "gpu/formats/tensor.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>
#include <optional>
#include <string>

namespace pensieve::bench {

// A model shape of BENCH.md.
struct ModelShape {
  std::string name;
  std::int32_t layers, dim, heads, kv_heads, ff;
};

// A mixed iteration: `decodes` sequences decoding one token each at
// `decode_context` tokens of context, and `prefills` sequences each feeding a
// chunk of `chunk` tokens after `history` tokens of their own KV (a
// conversation's new turn: its history is cached, its prompt is not).
struct MixedShape {
  std::int32_t decodes = 0;
  std::int32_t prefills = 0;
  std::int32_t chunk = 0;
  std::int32_t history = 0;
  std::int32_t tokens() const { return decodes + prefills * chunk; }
};

struct ModelRunOptions {
  std::size_t threads = 2;
  std::int32_t prompt_tokens = 512;   // prefill length
  std::int32_t prefill_reps = 2;      // best of
  std::int32_t decode_context = 16;   // prompt before decoding: keeps KV reads small
  std::int32_t decode_tokens = 32;    // timed decode steps (after 2 warm-up steps)
  std::int32_t vocab_size = 32000;    // without a vocabulary file
  std::optional<std::filesystem::path> vocab_from;
  std::filesystem::path model_dir;    // where the generated GGUFs go
  bool reuse_models = false;          // skip generation when the file exists
  bool weights_on_huge_pages = true;  // CpuForwardOptions::weights_on_huge_pages
  std::uint64_t seed = 7;
  // Measures the memory read bandwidth once (GB/s). When set, it is called
  // before the timed decode steps and after every 8 of them, so the decode
  // has a ceiling measured in the same seconds: this VM's bandwidth moves by
  // up to 2x between runs a minute apart. The probe evicts the caches, so
  // every step after it reads its weights from memory, as a larger model would.
  std::function<double()> bandwidth_sample;
  // Decode iterations of B sequences at once (one forward pass, B tokens),
  // timed for each B listed here (empty: none), decode_batch_steps each
  // after 2 warm-up iterations.
  std::vector<std::int32_t> decode_batches;
  std::int32_t decode_batch_steps = 8;
  // Mixed iterations (one forward pass of decodes and prefill chunks), each
  // timed decode_batch_steps times after one warm-up, beside a single
  // prefill of as many tokens and the roofline.
  std::vector<MixedShape> mixed;
};

struct MixedIterationRow {
  MixedShape shape;
  double median_seconds = 0;         // the mixed iteration
  double paged_median_seconds = 0;   // the same over a paged F16 pool (16-token blocks), as the server runs it
  double single_prefill_seconds = 0; // one sequence prefilling shape.tokens() from position 0, median
  double flops = 0;                  // matrices + attention of the mixed iteration
  double bytes_seconds = 0;          // weight bytes / the decode rows' median bandwidth
  double flops_seconds = 0;          // flops at the FMA and int8 dot peaks (set by the report)
};

// One decode batch size: its iteration time and the lower bound from the
// weights read at the measured bandwidth and the FLOPs at the compute peaks
// (the int8 dot peak for the quantised matrices' share, the FMA peak for
// the rest).
struct DecodeBatchRow {
  std::int32_t batch = 0;
  double median_seconds = 0;  // per iteration of `batch` tokens, contiguous F32 caches
  double paged_median_seconds = 0;  // the same over a paged F16 pool (the server's path)
  double flops = 0;           // matrix FLOPs of one iteration
  double bytes_seconds = 0;   // weight bytes / the bandwidth measured beside it
  double flops_seconds = 0;   // flops at the FMA and int8 dot peaks (set by the report)
};

struct ModelRunResult {
  std::string shape;
  std::string dtype;
  std::int32_t ff = 0;                  // as generated (Q8_0 rounds it up to whole blocks)
  bool tied_output = false;
  std::filesystem::path file;
  double params = 0;                    // every weight, embedding and output included
  double weight_bytes_per_token = 0;    // matrices and norms read by one decode step
  double prefill_flops = 0;             // projections + attention + one output row
  double prefill_seconds = 0;           // best of the reps
  double prefill_tokens_per_s = 0;
  double decode_seconds_per_token = 0;  // mean over the timed steps
  double decode_median_seconds = 0;
  double decode_tokens_per_s = 0;
  // Process CPU time over (wall time x threads) while timing: below 1 when the
  // machine was shared (or threads idled); spinning workers count as busy.
  double prefill_cpu_share = 0;
  double decode_cpu_share = 0;
  double kv_bytes_per_decode_token = 0; // mean K/V bytes read by attention, for reference
  double generate_seconds = 0;
  double weight_huge_page_bytes = 0;    // weights the forward pass reads from 2 MiB pages
  std::vector<double> decode_bandwidth_samples;  // GB/s, from bandwidth_sample, in order
  double decode_bandwidth_median = 0;            // their median (0 without samples)
  // Per run of 8 steps: its weight bytes per second over the mean of the two
  // probes around it; and the median of those (the table's figure).
  std::vector<double> decode_chunk_fractions;
  double decode_fraction_between_probes = 0;
  double matrix_params = 0;             // the layer matrices and the output head
  double integer_matrix_share = 0;      // of matrix_params: quantised blocks (integer dots)
  std::vector<DecodeBatchRow> decode_batches;
  std::vector<MixedIterationRow> mixed;
};

Result<ModelRunResult> run_model(const ModelShape& shape, model::DType dtype,
                                 const ModelRunOptions& options);

// The same on a GGUF made elsewhere (a llama-quantize mix such as Q4_K_M of
// a generated model): `model` and `dtype` are the row's labels.
Result<ModelRunResult> run_model_file(const std::string& model, const std::string& dtype,
                                      const std::filesystem::path& file,
                                      const ModelRunOptions& options);

}  // namespace pensieve::bench
