// fe-latency: the latency the HTTP front end adds to a streamed token (from
// the token being sampled to its bytes written to the client's
// socket) at N simultaneous streaming clients. Starts the server in process
// (the --model, by default a generated 1-layer model; the OpenAI routes on
// --http-threads I/O threads), runs the clients on loopback for --seconds in
// a child process (this program again, --client-of PORT: their CPU neither
// competes inside the server's process nor mixes into its figure), and
// prints the exact p50/p99/p999 of every sample with the load average, the
// server's and the clients' CPU and the machine's noise floor (how late a
// sleeping thread wakes meanwhile); --out writes the JSON (with this command
// line).
//
// --compute-nice 0,10 runs one server per listed nice value of the compute
// threads (EngineOptions::compute_nice), --rounds times in turn (0,10,0,10..),
// so settings compare side by side under the same machine noise.
//
//   fe-latency --clients 200 --seconds 10 --compute-nice 0,10 --rounds 2 --out /tmp/fe.json
#include "actors/engine.hpp"
#include "bench/common/machine_info.hpp"
#include "bench/fe-latency/client_process.hpp"
#include "bench/fe-latency/report.hpp"
#include "bench/fe-latency/served_model.hpp"
#include "bench/common/stream_load.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server_group.hpp"
#include "net/metrics.hpp"
#include "net/openai_routes.hpp"
#include "runtime/thread_priority.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

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
  std::string model = bench::one_layer_model_spec;
  std::string command;
  // Client mode (internal): the clients of the server on this port.
  std::optional<std::uint16_t> client_of;
  std::string served_model;  // the model name client mode's requests name
};

const char* usage =
    "fe-latency [--clients N] [--seconds S] [--http-threads N] [--engine-threads N] [--max-tokens "
    "N]\n"
    "           [--compute-nice N|idle[,...]] [--rounds R] [--model FILE|builtin|one-layer] [--out FILE.json]\n"
    "Defaults: 200 clients, 10 s, min(cores, 4) HTTP threads, 1 engine thread, 32 tokens per "
    "request,\n"
    "compute nice 0, 1 round, model one-layer (a generated 1-layer model; builtin: the generated\n"
    "model `pensieve` serves without --model; FILE: a GGUF). Several nice values run in turn, R\n"
    "times each. The clients run in a child process (--client-of PORT, internal).\n";

// "0,10,idle" -> {0, 10, rt::kIdleClass (20)}; nullopt on anything but
// 0..19 or idle.
std::optional<std::vector<int>> parse_nice_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item == "idle") {
      out.push_back(rt::kIdleClass);
      continue;
    }
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
    } else if (flag == "--model") {
      a.model = value;
    } else if (flag == "--served-model") {
      a.served_model = value;
    } else if (flag == "--client-of") {
      const int port = std::atoi(value.c_str());
      if (port < 1 || port > 65535) return std::nullopt;
      a.client_of = std::uint16_t(port);
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
  if (a.client_of && a.served_model.empty()) return std::nullopt;
  return a;
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

// The clients, in a child process; one that outlives its run by two minutes
// is stuck, and killed.
Result<bench::ClientResult> run_clients(const Args& args, std::uint16_t port, const std::string& model_name) {
  auto clients = bench::ClientProcess::spawn({port, args.clients, args.seconds, args.max_tokens, model_name});
  if (!clients) return clients.error();
  return clients->finish(std::chrono::seconds(args.seconds + 120));
}

// One server (engine + HTTP threads) with the compute threads at `nice`,
// loaded by the clients for --seconds.
Result<bench::FeRun> run_once(const Args& args, int nice, int round) {
  auto weights = bench::load_served_model(args.model);
  if (!weights) return weights.error();
  // Before the engine, which completes operations on its contexts.
  net::HttpServerGroup servers(args.http_threads);
  net::ServerMetrics metrics;
  metrics.keep_frontend_samples(true);
  actors::EngineOptions eo;
  eo.n_threads = std::size_t(args.engine_threads);
  eo.compute_nice = nice;
  eo.kv_cache_mb = args.model == bench::one_layer_model_spec ? 64 : 512;
  eo.scheduler.max_running = 256;
  eo.scheduler.max_batch_tokens = 2048;
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
  run.model_name = (*engine)->model_name();
  auto clients = run_clients(args, servers.port(), run.model_name);
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  run.cpu_s = cpu_seconds() - cpu_before;
  run.load_after = bench::load_average();
  run.wakeup_late_s = probe.finish();
  asio::io_context home;
  asio::co_spawn(home, servers.stop(std::chrono::milliseconds(0)), asio::detached);
  home.run();
  servers.join();
  if (!clients) return clients.error();
  run.load = std::move(clients->load);
  run.client_cpu_s = clients->cpu_s;
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
  if (args->client_of) {
    const auto load = bench::run_stream_clients(*args->client_of, args->clients, std::chrono::seconds(args->seconds),
                                                args->max_tokens, args->served_model);
    bench::write_client_result(load, stdout);
    return 0;
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
      "fe-latency: %d clients (a child process), %d s per run, %d HTTP threads, %d engine threads, %d tokens per "
      "request, model %s (%s)\n",
      args->clients, args->seconds, args->http_threads, args->engine_threads, args->max_tokens, args->model.c_str(),
      runs.empty() ? "" : runs.front().model_name.c_str());
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
    o["model"] = args->model;
    o["model_name"] = runs.empty() ? std::string() : runs.front().model_name;
    o["clients_in"] = "a child process";
    o["hardware_threads"] = machine.hardware_threads;
    o["cpu_model"] = machine.cpu_model;
    std::ofstream(*args->out) << json::serialize(o) << "\n";
  }
  return ok ? 0 : 1;
}
