// pensieve: the server. The one place that builds the components and wires
// them together: model, engine, front ends, signals.
#include "actors/engine.hpp"
#include "gpu/model/model_loader.hpp"
#include "net/engine_backend.hpp"
#include "net/admin_routes.hpp"
#include "net/api_keys.hpp"
#include "net/http_server.hpp"
#include "net/metrics.hpp"
#include "runtime/trace.hpp"
#include "net/openai_routes.hpp"
#include "net/rpc_server.hpp"
#include "net/web_assets.hpp"
#include "net/ws_chat_session.hpp"
#include "tools/pensieve/default_model.hpp"
#include "tools/pensieve/options.hpp"
#include "tools/pensieve/trace_capture.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <cstdio>
#include <iostream>

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

int serve(const server::Options& o) {
  // Created first, destroyed last: the engine's compute thread completes
  // operations on this context until the engine is gone.
  asio::io_context io(1);
  auto weights = load(o);
  if (!weights) {
    std::fprintf(stderr, "pensieve: %s\n", weights.error().message.c_str());
    return 1;
  }
  actors::EngineOptions engine_options;
  engine_options.n_threads = std::size_t(o.threads);
  engine_options.chat_template = o.chat_template.value_or("");
  engine_options.stateful = !o.no_state;
  engine_options.max_batch_tokens = o.max_batch_tokens;
  engine_options.kv_cache_mb = o.kv_device_mb;
  engine_options.kv_host_mb = o.kv_host_mb;
  engine_options.kv_disk_dir = o.kv_disk_dir.value_or("");
  engine_options.kv_disk_gb = o.kv_disk_gb;
  engine_options.eviction_policy =
      o.eviction_policy == "lru" ? actors::EvictionPolicyKind::lru : actors::EvictionPolicyKind::cost_aware;
  engine_options.swap_out_watermark = o.swap_out_watermark;
  engine_options.decode_reserve = o.decode_reserve;
  engine_options.gather_copies = o.gather_copies;
  engine_options.history_dir = o.history_dir.value_or("");
  net::ServerMetrics metrics;  // outlives the engine, whose scheduler records into it
  rt::Tracer tracer;           // likewise: the engine's threads record into it
  // Always wired, enabled only while recording (--trace, or POST
  // /admin/trace): disabled, a span costs one branch.
  engine_options.tracer = &tracer;
  if (o.trace_file) tracer.enable();
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
  net::EngineBackend backend(**engine, {std::chrono::seconds(o.request_timeout_s), &metrics});
  net::RouteOptions routes;
  routes.keys = std::make_shared<const net::ApiKeys>(std::move(*keys));
  routes.metrics = &metrics;
  net::HttpServerOptions http_options;
  // The WebSocket chat at /v1/ws, and its web page at /.
  // Its key comes in the Authorization header or as /v1/ws?api_key=KEY (a
  // browser cannot set headers); a wrong one is closed with 1008.
  net::WsChatOptions ws_options;
  ws_options.tenant_of = net::ws_tenant_of(routes.keys);
  ws_options.refuse_with_close = true;
  http_options.websocket_routes.push_back({"/v1/ws", net::make_ws_chat_handler(**engine, std::move(ws_options))});
  server::TraceCapturer trace_capturer(tracer, o.trace_file.has_value());
  net::AdminRouteOptions admin;
  admin.admin_key = o.admin_key.value_or("");
  admin.capture_trace = [&trace_capturer](std::chrono::seconds d) { return trace_capturer.capture(d); };
  net::HttpServer http(
      io.get_executor(),
      net::with_admin_routes(net::with_web_page(net::make_openai_routes(backend, routes)), std::move(admin)),
      std::move(http_options));
  if (auto r = http.listen(o.host, o.port); !r) {
    std::fprintf(stderr, "pensieve: %s\n", r.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "pensieve: serving '%s' on http://%s:%u (OpenAI API under /v1), %s\n",
               backend.model_name().c_str(), o.host.c_str(), unsigned(http.port()),
               o.no_state ? "stateless (--no-state: every turn recomputes its history)"
                          : "stateful (conversations keep their KV cache)");
  // Cap'n Proto RPC for internal clients (pensieve-cli): its own loop thread.
  net::RpcServerOptions rpc_options;
  rpc_options.host = o.host;
  rpc_options.port = o.rpc_port;
  rpc_options.keys = routes.keys;  // clients login(key) when keys are required
  auto rpc = net::RpcServer::start(**engine, io.get_executor(), rpc_options);
  if (!rpc) {
    std::fprintf(stderr, "pensieve: %s\n", rpc.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "pensieve: Cap'n Proto RPC on %s:%u\n", o.host.c_str(), unsigned((*rpc)->port()));
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    // The listeners close at once (new connections are refused); HTTP
    // requests in flight get the grace period, then their turns are
    // cancelled; RPC and WebSocket turns are cancelled now.
    std::fprintf(stderr, "pensieve: stopping (in-flight requests get %d s)\n", o.shutdown_grace_s);
    (*rpc)->stop();  // never waits on this executor: safe from its thread
    trace_capturer.stop();
    asio::co_spawn(io, http.stop(std::chrono::seconds(o.shutdown_grace_s)), [&](std::exception_ptr) { io.stop(); });
  });
  io.run();
  if (o.trace_file) {
    auto written = tracer.flush_to(*o.trace_file);
    if (!written) {
      std::fprintf(stderr, "pensieve: %s\n", written.error().message.c_str());
      return 1;
    }
    std::fprintf(stderr, "pensieve: wrote %zu trace spans to %s (%llu dropped)\n", *written, o.trace_file->c_str(),
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
