// pensieve: the server. The one place that builds the components and wires
// them together: model, engine, front ends, signals.
#include "actors/engine.hpp"
#include "gpu/model/model_loader.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "tools/pensieve/default_model.hpp"
#include "tools/pensieve/options.hpp"

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
  auto engine = actors::Engine::create(std::move(*weights), engine_options);
  if (!engine) {
    std::fprintf(stderr, "pensieve: %s\n", engine.error().message.c_str());
    return 1;
  }
  net::EngineBackend backend(**engine);
  net::HttpServer http(io.get_executor(), net::make_openai_routes(backend, {}), {});
  if (auto r = http.listen(o.host, o.port); !r) {
    std::fprintf(stderr, "pensieve: %s\n", r.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "pensieve: serving '%s' on http://%s:%u (OpenAI API under /v1), %s\n",
               backend.model_name().c_str(), o.host.c_str(), unsigned(http.port()),
               o.no_state ? "stateless (--no-state: every turn recomputes its history)"
                          : "stateful (conversations keep their KV cache)");
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    std::fprintf(stderr, "pensieve: stopping\n");
    asio::co_spawn(io, http.stop(), [&](std::exception_ptr) { io.stop(); });
  });
  io.run();
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
