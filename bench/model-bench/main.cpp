// model-bench: CPU decode and prefill speed of generated Llama models (the
// BENCH.md shapes) in F32, F16 and Q8_0, next to the machine's ceilings
// measured in the same run: memory read bandwidth (decode) and OpenBLAS sgemm
// (prefill). Prints a table; --out FILE writes the JSON for bench/results/.
// --gguf MODEL:LABEL:FILE adds a row for a file made elsewhere (the
// K-quant mixes, which the project cannot write: llama-quantize of a
// generated F16 model).
#include "bench/common/fma_peak.hpp"
#include "bench/common/int8_dot_peak.hpp"
#include "bench/common/machine_info.hpp"
#include "bench/common/memory_bandwidth.hpp"
#include "bench/common/sgemm_rate.hpp"
#include "bench/model-bench/model_run.hpp"
#include "bench/model-bench/report.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace pb = pensieve::bench;
namespace pm = pensieve::model;

namespace {

const std::vector<pb::ModelShape> bench_shapes = {
    {"M-tiny", 4, 256, 8, 4, 688},
    {"M-100", 12, 768, 12, 4, 2048},
    {"M-400", 24, 1024, 16, 8, 2816},
};

struct Args {
  pb::ModelRunOptions run;
  std::vector<std::string> models{"M-tiny", "M-100", "M-400"};
  std::vector<pm::DType> dtypes{pm::DType::f32, pm::DType::f16, pm::DType::q8_0};
  std::optional<std::string> out;
  std::string commit = "unknown";
  std::string note;
  std::size_t bandwidth_mib = 1024;
  bool ceilings_only = false;
  struct File {
    std::string model, label, path;
  };
  std::vector<File> files;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  return parts;
}

std::optional<pm::DType> parse_dtype(const std::string& s) {
  if (s == "f32") return pm::DType::f32;
  if (s == "f16") return pm::DType::f16;
  if (s == "q8_0") return pm::DType::q8_0;
  return std::nullopt;
}

const char* usage =
    "usage: model-bench [--threads N] [--models M-tiny,M-100,M-400] [--dtypes f32,f16,q8_0]\n"
    "  [--prompt-tokens 512] [--prefill-reps 2] [--decode-context 16] [--decode-tokens 32]\n"
    "  [--vocab-from VOCAB.gguf] [--model-dir DIR] [--reuse-models] [--seed 7]\n"
    "  [--bandwidth-mib 1024 (>= 64; well above the L3)] [--ceilings-only] [--out FILE.json]\n"
    "  [--no-huge-pages (weights read from the GGUF mapping, 4 KiB pages)]\n"
    "  [--commit HASH] [--note TEXT] (both copied into the JSON)\n"
    "  [--decode-batches 1,2,4,8,16 (decode iterations of that many sequences, each beside\n"
    "   its roofline)] [--decode-batch-steps 8]\n"
    "  [--mixed D:S:C:H,... (mixed iterations: D decodes and S prefill chunks of C tokens after\n"
    "   H cached tokens each, beside one prefill of as many tokens and the roofline)]\n"
    "  [--gguf MODEL:LABEL:FILE.gguf]... (rows for given files, after the generated ones;\n"
    "   --models '' for none of those)\n";

std::optional<Args> parse(int argc, char** argv) {
  Args a;
  a.run.model_dir = "/tmp/pensieve-model-bench";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    if (flag == "--reuse-models") { a.run.reuse_models = true; continue; }
    if (flag == "--ceilings-only") { a.ceilings_only = true; continue; }
    if (flag == "--no-huge-pages") { a.run.weights_on_huge_pages = false; continue; }
    const auto v = value();
    if (!v) return std::nullopt;
    if (flag == "--threads") a.run.threads = std::stoul(*v);
    else if (flag == "--models") a.models = split(*v);
    else if (flag == "--prompt-tokens") a.run.prompt_tokens = std::stoi(*v);
    else if (flag == "--prefill-reps") a.run.prefill_reps = std::stoi(*v);
    else if (flag == "--decode-context") a.run.decode_context = std::stoi(*v);
    else if (flag == "--decode-tokens") a.run.decode_tokens = std::stoi(*v);
    else if (flag == "--decode-batch-steps") a.run.decode_batch_steps = std::stoi(*v);
    else if (flag == "--decode-batches") {
      a.run.decode_batches.clear();
      for (const auto& b : split(*v)) a.run.decode_batches.push_back(std::stoi(b));
    }
    else if (flag == "--mixed") {
      for (const auto& m : split(*v)) {
        pb::MixedShape s;
        if (std::sscanf(m.c_str(), "%d:%d:%d:%d", &s.decodes, &s.prefills, &s.chunk, &s.history) != 4 ||
            s.decodes < 0 || s.prefills < 0 || s.chunk < 1 || s.history < 0 || s.tokens() < 1)
          return std::nullopt;
        a.run.mixed.push_back(s);
      }
    }
    else if (flag == "--vocab-from") a.run.vocab_from = *v;
    else if (flag == "--model-dir") a.run.model_dir = *v;
    else if (flag == "--seed") a.run.seed = std::stoull(*v);
    else if (flag == "--bandwidth-mib") a.bandwidth_mib = std::stoul(*v);
    else if (flag == "--out") a.out = *v;
    else if (flag == "--commit") a.commit = *v;
    else if (flag == "--note") a.note = *v;
    else if (flag == "--gguf") {
      const auto first = v->find(':'), second = v->find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) return std::nullopt;
      a.files.push_back({v->substr(0, first), v->substr(first + 1, second - first - 1),
                         v->substr(second + 1)});
    }
    else if (flag == "--dtypes") {
      a.dtypes.clear();
      for (const auto& d : split(*v)) {
        auto t = parse_dtype(d);
        if (!t) return std::nullopt;
        a.dtypes.push_back(*t);
      }
    } else {
      return std::nullopt;
    }
  }
  if (a.run.threads < 1 || a.run.prompt_tokens < 1 || a.run.decode_tokens < 1 ||
      a.run.decode_context < 1 || a.run.prefill_reps < 1 || a.bandwidth_mib < 64 ||
      a.run.decode_batch_steps < 1 ||
      std::any_of(a.run.decode_batches.begin(), a.run.decode_batches.end(), [](int b) { return b < 1; }))
    return std::nullopt;
  return a;
}

std::string joined_command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

const pb::ModelShape* find_shape(const std::string& name) {
  for (const auto& s : bench_shapes)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Args> args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception&) {  // std::stoi on a non-number
    args.reset();
  }
  if (!args) {
    std::fputs(usage, stderr);
    return 2;
  }
  pb::ModelBenchReport report;
  report.command_line = joined_command_line(argc, argv);
  report.machine = pb::machine_info();
  report.load_average_start = pb::load_average();
  report.threads = args->run.threads;
  report.commit = args->commit;
  report.note = args->note;
  report.options = args->run;
  const int threads = static_cast<int>(args->run.threads);

  pb::ReadBandwidthProbe probe(args->bandwidth_mib << 20, threads);
  report.bandwidth.push_back(probe.measure(5));
  report.sgemm.push_back(pb::measure_sgemm(512, 2816, 1024, threads, 5));
  report.fma_peak = pb::measure_fma_peak(threads, 5);
  report.int8_peak = pb::measure_int8_dot_peak(threads, 5);
  args->run.bandwidth_sample = [&probe] { return probe.measure(1).best_gb_per_s; };
  std::fprintf(stderr,
               "ceilings: %.1f GB/s read, %.1f GFLOP/s sgemm, %.1f GFLOP/s FMA peak, %.1f GOP/s "
               "int8 dot peak\n",
               report.bandwidth.back().best_gb_per_s, report.sgemm.back().best_gflops,
               report.fma_peak.best_gflops, report.int8_peak.best_gops);

  int failures = 0;
  for (const auto& name : args->ceilings_only ? std::vector<std::string>{} : args->models) {
    const pb::ModelShape* shape = find_shape(name);
    if (!shape) {
      std::fprintf(stderr, "unknown model %s (M-tiny, M-100, M-400)\n", name.c_str());
      return 2;
    }
    for (pm::DType dtype : args->dtypes) {
      report.bandwidth.push_back(probe.measure(3));
      auto run = pb::run_model(*shape, dtype, args->run);
      if (!run) {
        std::fprintf(stderr, "%s %s: %s\n", name.c_str(), pm::dtype_name(dtype),
                     run.error().message.c_str());
        ++failures;
        continue;
      }
      std::fprintf(stderr, "%s %s: decode %.1f tok/s, prefill %.1f tok/s\n", name.c_str(),
                   pm::dtype_name(dtype), run->decode_tokens_per_s, run->prefill_tokens_per_s);
      report.runs.push_back(std::move(*run));
    }
  }
  for (const auto& f : args->ceilings_only ? std::vector<Args::File>{} : args->files) {
    report.bandwidth.push_back(probe.measure(3));
    auto run = pb::run_model_file(f.model, f.label, f.path, args->run);
    if (!run) {
      std::fprintf(stderr, "%s: %s\n", f.path.c_str(), run.error().message.c_str());
      ++failures;
      continue;
    }
    std::fprintf(stderr, "%s %s: decode %.1f tok/s, prefill %.1f tok/s\n", f.model.c_str(),
                 f.label.c_str(), run->decode_tokens_per_s, run->prefill_tokens_per_s);
    report.runs.push_back(std::move(*run));
  }
  report.bandwidth.push_back(probe.measure(3));
  report.sgemm.push_back(pb::measure_sgemm(512, 2816, 1024, threads, 3));

  const pb::FmaPeakResult peak_end = pb::measure_fma_peak(threads, 3);
  if (peak_end.best_gflops > report.fma_peak.best_gflops) report.fma_peak = peak_end;
  const pb::Int8DotPeakResult int8_end = pb::measure_int8_dot_peak(threads, 3);
  if (int8_end.best_gops > report.int8_peak.best_gops) report.int8_peak = int8_end;
  for (auto& run : report.runs) {
    for (auto& row : run.decode_batches) row.flops_seconds = pb::compute_seconds(report, run, row.flops);
    for (auto& row : run.mixed) row.flops_seconds = pb::compute_seconds(report, run, row.flops);
  }
  report.load_average_end = pb::load_average();
  std::fputs(pb::format_table(report).c_str(), stdout);
  if (args->out) {
    std::ofstream out(*args->out);
    out << pb::format_json(report);
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", args->out->c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "checksum %g\n", probe.checksum());
  return failures == 0 ? 0 : 1;
}
