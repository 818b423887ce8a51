// fe-latency: the latency the HTTP front end adds to a streamed token (from
// the token leaving the scheduler to its bytes written to the client's
// socket) at N simultaneous streaming clients. Starts the server in process
// (a generated 1-layer model, the OpenAI routes on --http-threads I/O
// threads), runs the clients on loopback for --seconds, and prints the exact
// p50/p99/p999 of every sample with the load average and the machine's
// noise floor (how late a sleeping thread wakes meanwhile); --out writes the
// JSON (with this command line).
//
// --compute-nice 0,10 runs one server per listed nice value of the compute
// threads (EngineOptions::compute_nice), --rounds times in turn (0,10,0,10..),
// so settings compare side by side under the same machine noise.
//
//   fe-latency --clients 200 --seconds 10 --compute-nice 0,10 --rounds 2 --out /tmp/fe.json
#include "actors/engine.hpp"
#include "bench/common/machine_info.hpp"
#include "bench/fe-latency/report.hpp"
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
#include <sstream>
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
  int rounds = 1;
  std::vector<int> compute_nice{0};
  std::optional<std::string> out;
  std::string command;
};

const char* usage =
    "fe-latency [--clients N] [--seconds S] [--http-threads N] [--engine-threads N] [--max-tokens "
    "N]\n"
    "           [--compute-nice N[,N...]] [--rounds R] [--out FILE.json]\n"
    "Defaults: 200 clients, 10 s, min(cores, 4) HTTP threads, 1 engine thread, 32 tokens per "
    "request,\n"
    "compute nice 0, 1 round. Several nice values run in turn, R times each.\n";

// "0,10,19" -> {0, 10, 19}; nullopt on anything but 0..19 values.
std::optional<std::vector<int>> parse_nice_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > 19) return std::nullopt;
    out.push_back(int(v));
  }
  if (out.empty()) return std::nullopt;
  return out;
}

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
                  : flag == "--rounds"         ? &a.rounds
                                               : nullptr;
    if (flag == "--out") {
      a.out = value;
    } else if (flag == "--compute-nice") {
      auto list = parse_nice_list(value);
      if (!list) return std::nullopt;
      a.compute_nice = std::move(*list);
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
  const auto dir = std::filesystem::temp_directory_path() /
                   ("pensieve-fe-latency-" + std::to_string(::getpid()));
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
            late_s_.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - target).count());
          }
        }) {}
  // Stops the probe; its samples.
  std::vector<double> finish() {
    stop_ = true;
    thread_.join();
    return std::move(late_s_);
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<double> late_s_;  // the probe thread's until finish() joins it
  std::thread thread_;
};

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// One server (engine + HTTP threads) with the compute threads at `nice`,
// loaded by the clients for --seconds.
Result<bench::FeRun> run_once(const Args& args, int nice, int round) {
  auto weights = one_layer_model();
  if (!weights) return weights.error();
  // Before the engine, which completes operations on its contexts.
  net::HttpServerGroup servers(args.http_threads);
  net::ServerMetrics metrics;
  metrics.keep_frontend_samples(true);
  actors::EngineOptions eo;
  eo.n_threads = std::size_t(args.engine_threads);
  eo.compute_nice = nice;
  eo.kv_cache_mb = 64;
  eo.max_running = 256;
  eo.max_batch_tokens = 2048;
  auto engine = actors::Engine::create(std::move(*weights), eo);
  if (!engine) return engine.error();
  net::EngineBackend backend(**engine, {std::chrono::minutes(5), &metrics});
  net::RouteOptions routes;
  routes.metrics = &metrics;
  if (auto r = servers.listen("127.0.0.1", 0, net::make_openai_routes(backend, routes), {}); !r)
    return r.error();

  bench::FeRun run;
  run.compute_nice = nice;
  run.round = round;
  run.load_before = bench::load_average();
  const double cpu_before = cpu_seconds();
  WakeupProbe probe;
  const auto started = std::chrono::steady_clock::now();
  run.load = bench::run_stream_clients(servers.port(), args.clients,
                                       std::chrono::seconds(args.seconds), args.max_tokens);
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  run.cpu_s = cpu_seconds() - cpu_before;
  run.load_after = bench::load_average();
  run.wakeup_late_s = probe.finish();
  asio::io_context home;
  asio::co_spawn(home, servers.stop(std::chrono::milliseconds(0)), asio::detached);
  home.run();
  servers.join();
  run.completion_tokens =
      std::int64_t(run.load.ok) * args.max_tokens;  // ignore_eos: every reply is max_tokens long
  run.samples_s = metrics.frontend_samples();
  run.taken_s = metrics.frontend_taken_samples();
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = parse(argc, argv);
  if (!args) {
    std::fputs(usage, stderr);
    return 2;
  }
  std::vector<bench::FeRun> runs;
  for (int round = 1; round <= args->rounds; ++round) {
    for (int nice : args->compute_nice) {
      auto run = run_once(*args, nice, round);
      if (!run) {
        std::fprintf(stderr, "fe-latency: %s\n", run.error().message.c_str());
        return 1;
      }
      runs.push_back(std::move(*run));
    }
  }
  std::printf(
      "fe-latency: %d clients, %d s per run, %d HTTP threads, %d engine threads, %d tokens per "
      "request\n",
      args->clients, args->seconds, args->http_threads, args->engine_threads, args->max_tokens);
  bench::print_runs(runs, args->compute_nice);
  bool ok = true;
  for (const auto& r : runs) ok = ok && r.load.failed == 0 && !r.samples_s.empty();
  if (args->out) {
    const auto machine = bench::machine_info();
    json::object o = bench::runs_json(runs, args->compute_nice);
    o["command"] = args->command;
    o["clients"] = args->clients;
    o["seconds"] = args->seconds;
    o["http_threads"] = args->http_threads;
    o["engine_threads"] = args->engine_threads;
    o["max_tokens"] = args->max_tokens;
    o["rounds"] = args->rounds;
    o["hardware_threads"] = machine.hardware_threads;
    o["cpu_model"] = machine.cpu_model;
    std::ofstream(*args->out) << json::serialize(o) << "\n";
  }
  return ok ? 0 : 1;
}
