// fe-latency: the latency the HTTP front end adds to a streamed token (from
// the token leaving the scheduler to its bytes written to the client's
// socket) at N simultaneous streaming clients. Starts the server in process
// (a generated 1-layer model, the OpenAI routes on --http-threads I/O
// threads), runs the clients on loopback for --seconds, and prints the exact
// p50/p99/p999 of every sample with the load average and the machine's
// noise floor (how late a sleeping thread wakes meanwhile); --out writes the
// JSON (with this command line).
//
//   fe-latency --clients 200 --seconds 10 --out /tmp/fe.json
#include "actors/engine.hpp"
#include "bench/common/machine_info.hpp"
#include "bench/fe-latency/stream_clients.hpp"
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server_group.hpp"
#include "net/metrics.hpp"
#include "net/openai_routes.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace pensieve;

namespace {

struct Args {
  int clients = 200;
  int seconds = 10;
  int http_threads = int(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
  int engine_threads = 1;
  int max_tokens = 32;
  std::optional<std::string> out;
  std::string command;
};

const char* usage =
    "fe-latency [--clients N] [--seconds S] [--http-threads N] [--engine-threads N] [--max-tokens N] [--out FILE.json]\n"
    "Defaults: 200 clients, 10 s, min(cores, 4) HTTP threads, 1 engine thread, 32 tokens per request.\n";

std::optional<Args> parse(int argc, char** argv) {
  Args a;
  for (int i = 0; i < argc; ++i) a.command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help") return std::nullopt;
    if (i + 1 >= argc) return std::nullopt;
    const std::string value = argv[++i];
    int* target = flag == "--clients"          ? &a.clients
                  : flag == "--seconds"        ? &a.seconds
                  : flag == "--http-threads"   ? &a.http_threads
                  : flag == "--engine-threads" ? &a.engine_threads
                  : flag == "--max-tokens"     ? &a.max_tokens
                                               : nullptr;
    if (flag == "--out") {
      a.out = value;
    } else if (target) {
      *target = std::atoi(value.c_str());
      if (*target < 1) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  return a;
}

// The soak test's shape: 1 layer, dim 32, the built-in vocabulary, so the
// scheduler is fast and the front end is what is measured.
Result<model::ModelWeights> one_layer_model() {
  const auto dir = std::filesystem::temp_directory_path() / ("pensieve-fe-latency-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  model::TestModelOptions o;
  o.n_layers = 1;
  o.dim = 32;
  o.n_heads = 2;
  o.n_kv_heads = 1;
  o.ff_dim = 64;
  o.max_context = 256;
  o.dtype = model::DType::f32;
  o.seed = 3;
  o.name = "tiny";
  if (auto r = model::write_builtin_vocab_gguf(dir / "vocab.gguf"); !r) return r.error();
  o.vocab_from = dir / "vocab.gguf";
  if (auto r = model::make_test_model(o, dir / "model.gguf"); !r) return r.error();
  auto weights = model::load_model(dir / "model.gguf");  // stays mapped after the files go
  std::filesystem::remove_all(dir);
  return weights;
}

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto i = std::size_t(q * double(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

// The machine's own noise floor, measured alongside: how late a thread that
// sleeps until a deadline (every ms) wakes up. On a quiet machine this is
// tens of microseconds; on a loaded one it is what any thread hop pays.
class WakeupProbe {
 public:
  WakeupProbe()
      : thread_([this] {
          while (!stop_.load(std::memory_order_relaxed)) {
            const auto target = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
            std::this_thread::sleep_until(target);
            late_s_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - target).count());
          }
        }) {}
  // Stops the probe; its samples, sorted.
  std::vector<double> finish() {
    stop_ = true;
    thread_.join();
    std::sort(late_s_.begin(), late_s_.end());
    return late_s_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<double> late_s_;  // the probe thread's until finish() joins it
  std::thread thread_;
};

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// What one run measured.
struct Run {
  bench::StreamLoad load;
  std::vector<double> samples;  // front-end latency, seconds
  std::vector<double> wakeup;   // the probe's lateness, seconds, sorted
  double cpu_s = 0, wall_s = 0;
  std::string load_before, load_after;
};

// Prints the run; writes its JSON to --out.
void report(const Args& args, Run& run) {
  auto& samples = run.samples;
  std::sort(samples.begin(), samples.end());
  const double p50 = quantile(samples, 0.5), p99 = quantile(samples, 0.99), p999 = quantile(samples, 0.999);
  const double max = samples.empty() ? 0 : samples.back();
  const double wake50 = quantile(run.wakeup, 0.5), wake99 = quantile(run.wakeup, 0.99);
  std::printf("fe-latency: %d clients, %d s, %d HTTP threads: %llu requests (%llu failed), %zu tokens\n",
              args.clients, args.seconds, args.http_threads, static_cast<unsigned long long>(run.load.ok),
              static_cast<unsigned long long>(run.load.failed), samples.size());
  std::printf("front-end added latency: p50 %.3f ms, p99 %.3f ms, p999 %.3f ms, max %.3f ms\n", p50 * 1e3, p99 * 1e3,
              p999 * 1e3, max * 1e3);
  std::printf("process CPU %.1f s over %.1f s wall; load average before %s, after %s\n", run.cpu_s, run.wall_s,
              run.load_before.c_str(), run.load_after.c_str());
  std::printf("machine noise floor: a sleeping thread wakes late by p50 %.3f ms, p99 %.3f ms\n", wake50 * 1e3,
              wake99 * 1e3);
  if (!run.load.first_error.empty()) std::printf("first error: %s\n", run.load.first_error.c_str());
  if (!args.out) return;
  const auto machine = bench::machine_info();
  json::object o{{"command", args.command},
                 {"clients", args.clients},
                 {"seconds", args.seconds},
                 {"http_threads", args.http_threads},
                 {"engine_threads", args.engine_threads},
                 {"max_tokens", args.max_tokens},
                 {"requests_ok", run.load.ok},
                 {"requests_failed", run.load.failed},
                 {"tokens", samples.size()},
                 {"p50_ms", p50 * 1e3},
                 {"p99_ms", p99 * 1e3},
                 {"p999_ms", p999 * 1e3},
                 {"max_ms", max * 1e3},
                 {"process_cpu_s", run.cpu_s},
                 {"wall_s", run.wall_s},
                 {"wakeup_late_p50_ms", wake50 * 1e3},
                 {"wakeup_late_p99_ms", wake99 * 1e3},
                 {"load_average_before", run.load_before},
                 {"load_average_after", run.load_after},
                 {"hardware_threads", machine.hardware_threads},
                 {"cpu_model", machine.cpu_model}};
  std::ofstream(*args.out) << json::serialize(o) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  auto args = parse(argc, argv);
  if (!args) {
    std::fputs(usage, stderr);
    return 2;
  }
  auto weights = one_layer_model();
  if (!weights) {
    std::fprintf(stderr, "fe-latency: %s\n", weights.error().message.c_str());
    return 1;
  }
  // Before the engine, which completes operations on its contexts.
  net::HttpServerGroup servers(args->http_threads);
  net::ServerMetrics metrics;
  metrics.keep_frontend_samples(true);
  actors::EngineOptions eo;
  eo.n_threads = std::size_t(args->engine_threads);
  eo.kv_cache_mb = 64;
  eo.max_running = 256;
  eo.max_batch_tokens = 2048;
  auto engine = actors::Engine::create(std::move(*weights), eo);
  if (!engine) {
    std::fprintf(stderr, "fe-latency: %s\n", engine.error().message.c_str());
    return 1;
  }
  net::EngineBackend backend(**engine, {std::chrono::minutes(5), &metrics});
  net::RouteOptions routes;
  routes.metrics = &metrics;
  if (auto r = servers.listen("127.0.0.1", 0, net::make_openai_routes(backend, routes), {}); !r) {
    std::fprintf(stderr, "fe-latency: %s\n", r.error().message.c_str());
    return 1;
  }

  const std::string load_before = bench::load_average();
  const double cpu_before = cpu_seconds();
  WakeupProbe probe;
  const auto started = std::chrono::steady_clock::now();
  const bench::StreamLoad load =
      bench::run_stream_clients(servers.port(), args->clients, std::chrono::seconds(args->seconds), args->max_tokens);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double cpu_s = cpu_seconds() - cpu_before;
  const std::string load_after = bench::load_average();
  const std::vector<double> wakeup = probe.finish();
  asio::io_context home;
  asio::co_spawn(home, servers.stop(std::chrono::milliseconds(0)), asio::detached);
  home.run();
  servers.join();

  Run run{load, metrics.frontend_samples(), wakeup, cpu_s, wall_s, load_before, load_after};
  report(*args, run);
  return load.failed == 0 && !run.samples.empty() ? 0 : 1;
}
