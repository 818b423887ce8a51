// pensieve: the server. The one place that builds the components and wires
// them together: model, engine, front ends, signals.
#include "actors/engine.hpp"
#include "gpu/kernels/decode_plan_table.hpp"
#include "gpu/model/model_loader.hpp"
#include "net/engine_backend.hpp"
#include "net/admin_routes.hpp"
#include "net/api_keys.hpp"
#include "net/http_server_group.hpp"
#include "net/metrics.hpp"
#include "net/tenant_limits.hpp"
#include "runtime/trace.hpp"
#include "runtime/trace_flusher.hpp"
#include "net/openai_routes.hpp"
#include "net/rpc_server.hpp"
#include "net/web_assets.hpp"
#include "net/ws_chat_session.hpp"
#include "tools/pensieve/default_model.hpp"
#include "tools/pensieve/options.hpp"
#include "tools/pensieve/trace_capture.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/signal_set.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <thread>

namespace asio = boost::asio;
using namespace pensieve;

namespace {

Result<model::ModelWeights> load(const server::Options& o) {
  if (o.model) return model::load_model(*o.model);
  auto path = server::ensure_default_model(server::default_cache_dir());
  if (!path) return path.error();
  std::fprintf(stderr,
               "pensieve: no --model given: serving the built-in test model %s\n"
               "pensieve: its weights are RANDOM: replies are meaningless, the work is real\n",
               path->c_str());
  return model::load_model(*path);
}

Result<net::ApiKeys> api_keys(const server::Options& o) {
  if (o.api_keys_file) return net::ApiKeys::from_file(*o.api_keys_file);
  if (o.api_key) return net::ApiKeys::single(*o.api_key);
  return net::ApiKeys();
}

// A flag a coroutine can wait for; one executor's thread only.
class OneShot {
 public:
  explicit OneShot(const asio::any_io_executor& ex) : timer_(ex, asio::steady_timer::time_point::max()) {}
  void set() {
    set_ = true;
    timer_.cancel();
  }
  asio::awaitable<void> wait() {
    if (!set_) co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  }

 private:
  asio::steady_timer timer_;
  bool set_ = false;
};

asio::awaitable<void> stop_front_ends(net::HttpServerGroup& http, std::chrono::seconds grace, OneShot& rpc_stopped) {
  co_await http.stop(grace);
  co_await rpc_stopped.wait();
}

int serve(const server::Options& o) {
  // Created first, destroyed last: the engine's compute thread completes
  // operations on this context until the engine is gone.
  asio::io_context io(1);
  // Likewise for the HTTP/WebSocket I/O threads' contexts.
  const int http_threads =
      o.http_threads > 0 ? o.http_threads : int(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  net::HttpServerGroup http(http_threads);
  auto weights = load(o);
  if (!weights) {
    std::fprintf(stderr, "pensieve: %s\n", weights.error().message.c_str());
    return 1;
  }
  actors::EngineOptions engine_options;
  engine_options.n_threads = std::size_t(o.threads);
  engine_options.compute_nice = o.compute_nice;
  engine_options.backend = o.backend == "cuda" ? pensieve::backend::BackendKind::cuda : pensieve::backend::BackendKind::cpu;
  engine_options.tp = o.tp;
  engine_options.chat_template = o.chat_template.value_or("");
  engine_options.max_conversations_per_tenant = o.max_conversations_per_tenant;
  engine_options.max_conversations = o.max_conversations;
  engine_options.conversation_idle_s = o.conversation_idle_s;
  engine_options.scheduler = o.scheduler;
  engine_options.kv_cache = o.kv_cache;
  if (o.cost_model == "measure") {
    engine_options.cost_model_source = actors::CostModelSource::measured;
  } else if (o.cost_model != "default") {
    engine_options.cost_model_profile = o.cost_model;
  }
  engine_options.kv_cache_mb = o.kv_device_mb;
  engine_options.kv_host_mb = o.kv_host_mb;
  engine_options.kv_disk_dir = o.kv_disk_dir.value_or("");
  engine_options.kv_disk_gb = o.kv_disk_gb;
  engine_options.kv_flush_on_exit_s = o.kv_flush_on_exit_s;
  engine_options.kv_dtype = o.kv_dtype;
  engine_options.gather_copies = o.gather_copies;
  engine_options.swap_gather_kernel = o.swap_gather_kernel;
  if (o.decode_plan) {
    auto table = kernels::load_decode_plan_table(*o.decode_plan);
    if (!table) {
      std::fprintf(stderr, "pensieve: %s\n", table.error().message.c_str());
      return 1;
    }
    engine_options.decode_thresholds = table->thresholds;
    std::fprintf(stderr, "pensieve: decode plan from %s (%s): %s\n", o.decode_plan->c_str(),
                 table->device.empty() ? "device not named" : table->device.c_str(),
                 kernels::describe(table->thresholds).c_str());
  }
  engine_options.history_dir = o.history_dir.value_or("");
  engine_options.history_reset_on_model_change = o.history_reset_on_model_change;
  engine_options.context_overflow = o.context_overflow;
  net::ServerMetrics metrics;  // outlives the engine, whose scheduler records into it
  rt::Tracer tracer;           // likewise: the engine's threads record into it
  // Always wired, enabled only while recording (--trace, or POST
  // /admin/trace): disabled, a span costs one branch.
  engine_options.tracer = &tracer;
  // --trace: a thread appends the rings to the file every --trace-flush-ms,
  // so a long run keeps every span (a ring holds 32768 per thread).
  std::unique_ptr<rt::TraceFlusher> trace_flusher;
  if (o.trace_file) {
    auto flusher = rt::TraceFlusher::start(tracer, *o.trace_file, std::chrono::milliseconds(o.trace_flush_ms));
    if (!flusher) {
      std::fprintf(stderr, "pensieve: %s\n", flusher.error().message.c_str());
      return 1;
    }
    trace_flusher = std::move(*flusher);
    tracer.enable();
  }
  engine_options.on_iteration = [&metrics](const actors::IterationRecord& r) {
    metrics.batch(r.sequences, r.decode_tokens + r.prefill_tokens);
  };
  auto keys = api_keys(o);
  if (!keys) {
    std::fprintf(stderr, "pensieve: %s\n", keys.error().message.c_str());
    return 2;
  }
  auto engine = actors::Engine::create(std::move(*weights), engine_options);
  if (!engine) {
    std::fprintf(stderr, "pensieve: %s\n", engine.error().message.c_str());
    return 1;
  }
  // The bounds every front end checks a turn against (net/turn_call.hpp).
  net::RequestLimits limits;
  if (o.max_turns_per_tenant > 0) {
    limits.tenant_turns = std::make_shared<net::TenantTurnLimiter>(o.max_turns_per_tenant);
  }
  // How every front end drains a turn: the request timeout (the turn is
  // cancelled and answered with a timeout error) and the metrics it records.
  const net::TurnCallOptions turn_options{std::chrono::seconds(o.request_timeout_s), &metrics};
  net::EngineBackend backend(**engine, {turn_options.timeout, &metrics, limits});
  net::RouteOptions routes;
  routes.limits = limits;
  routes.keys = std::make_shared<const net::ApiKeys>(std::move(*keys));
  routes.metrics = &metrics;
  net::HttpServerOptions http_options;
  // The WebSocket chat at /v1/ws, and its web page at /.
  // Its key comes in the Authorization header or as /v1/ws?api_key=KEY (a
  // browser cannot set headers); a wrong one is closed with 1008.
  net::WsChatOptions ws_options;
  ws_options.tenant_of = net::ws_tenant_of(routes.keys);
  ws_options.refuse_with_close = true;
  ws_options.limits = limits;
  ws_options.turn = turn_options;
  http_options.websocket_routes.push_back({"/v1/ws", net::make_ws_chat_handler(**engine, std::move(ws_options))});
  server::TraceCapturer trace_capturer(tracer, o.trace_file.has_value());
  net::AdminRouteOptions admin;
  admin.admin_key = o.admin_key.value_or("");
  // The capturer lives on `io`'s thread; the request may come on any HTTP thread.
  admin.capture_trace = [&trace_capturer, &io](std::chrono::seconds d) -> asio::awaitable<net::ApiResult<std::string>> {
    auto captured = co_await asio::co_spawn(io, trace_capturer.capture(d), asio::use_awaitable);
    co_return captured;
  };
  admin.clear_prefix_cache = [&engine] { (*engine)->clear_prefix_cache(); };
  admin.pin_prefix = [&backend](net::ChatRequest r) { return net::pin_through(backend, std::move(r)); };
  admin.unpin_prefixes = [&engine](std::optional<std::string> tenant, std::optional<std::string> salt) {
    return (*engine)->unpin_prefixes(std::move(tenant), std::move(salt));
  };
  admin.limits = limits;
  const net::HttpHandler handler =
      net::with_admin_routes(net::with_web_page(net::make_openai_routes(backend, routes)), std::move(admin));
  // Caught from the moment clients can connect: a SIGTERM before the RPC
  // server is up (a turn may already stream) must reach the graceful path
  // below, not the default action that kills the process mid-turn. Before
  // this, while the model loads, SIGINT still stops at once.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  if (auto r = http.listen(o.host, o.port, handler, std::move(http_options)); !r) {
    std::fprintf(stderr, "pensieve: %s\n", r.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "pensieve: chat template: %s\n", (*engine)->chat_template_description().c_str());
  std::fprintf(stderr, "pensieve: eviction cost model: %s\n", actors::describe((*engine)->cost_model()).c_str());
  if (!(*engine)->kv_disk_note().empty()) std::fprintf(stderr, "pensieve: %s\n", (*engine)->kv_disk_note().c_str());
  if (!(*engine)->history_note().empty()) {
    std::fprintf(stderr, "pensieve: --history-reset-on-model-change: %s\n", (*engine)->history_note().c_str());
  }
  std::fprintf(stderr, "pensieve: serving '%s' on http://%s:%u (OpenAI API under /v1; %d I/O threads), %s\n",
               backend.model_name().c_str(), o.host.c_str(), unsigned(http.port()), http_threads,
               !o.scheduler.keep_kv ? "stateless (--no-state: every turn recomputes its history)"
                          : "stateful (conversations keep their KV cache)");
  // Cap'n Proto RPC for internal clients (pensieve-cli): its own loop thread.
  net::RpcServerOptions rpc_options;
  rpc_options.host = o.host;
  rpc_options.port = o.rpc_port;
  rpc_options.keys = routes.keys;  // clients login(key) when keys are required
  rpc_options.limits = limits;
  rpc_options.turn = turn_options;
  auto rpc = net::RpcServer::start(**engine, io.get_executor(), rpc_options);
  if (!rpc) {
    std::fprintf(stderr, "pensieve: %s\n", rpc.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "pensieve: Cap'n Proto RPC on %s:%u\n", o.host.c_str(), unsigned((*rpc)->port()));
  OneShot rpc_stopped(io.get_executor());
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    // The HTTP listener closes at once (new connections are refused); no
    // front end takes new turns; HTTP requests, WebSocket chats (then closed
    // with 1001) and RPC calls with a turn in flight get the grace period,
    // then their turns are cancelled.
    std::fprintf(stderr, "pensieve: stopping (in-flight requests get %d s)\n", o.shutdown_grace_s);
    const auto grace = std::chrono::seconds(o.shutdown_grace_s);
    // Never waits on this executor (the engine's turns run on it).
    (*rpc)->shutdown(grace, [&] { asio::post(io, [&] { rpc_stopped.set(); }); });
    trace_capturer.stop();
    asio::co_spawn(io, stop_front_ends(http, grace, rpc_stopped), [&](std::exception_ptr) { io.stop(); });
  });
  io.run();
  http.join();  // before the engine goes: its threads run the connections
  if (!(*engine)->kv_disk_note().empty() && o.kv_flush_on_exit_s > 0) {
    const actors::KvFlushReport f = (*engine)->flush_kv_to_disk();
    std::fprintf(stderr, "pensieve: flushed %lld KV chunks to the disk tier in %.2f s%s (%lld left without a disk copy)\n",
                 static_cast<long long>(f.chunks_written), f.seconds,
                 f.timed_out ? ", stopped by --kv-flush-on-exit-s" : "", static_cast<long long>(f.chunks_left + f.waiting));
  }
  if (trace_flusher) {
    tracer.disable();
    auto written = trace_flusher->stop();
    if (!written) {
      std::fprintf(stderr, "pensieve: %s\n", written.error().message.c_str());
      return 1;
    }
    std::fprintf(stderr, "pensieve: wrote %llu trace spans to %s (%llu dropped)\n",
                 static_cast<unsigned long long>(*written), o.trace_file->c_str(),
                 static_cast<unsigned long long>(tracer.dropped()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto options = server::parse_options(std::vector<std::string>(argv + 1, argv + argc));
  if (!options) {
    std::fprintf(stderr, "pensieve: %s\n", options.error().message.c_str());
    return 2;
  }
  if (options->help) {
    std::cout << server::usage();
    return 0;
  }
  return serve(*options);
}
