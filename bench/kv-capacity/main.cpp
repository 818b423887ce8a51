// kv-capacity: how many conversations the device KV tier holds at one
// --kv-device-mb, per --kv-dtype, through the embedded Engine on the CPU
// backend. Each dtype gets a fresh engine with no host tier (a conversation
// whose KV does not fit is dropped, leading chunks first) and the same
// conversations, one turn each, one after another; then the scheduler's
// counters say how many blocks the pool has and how many hold KV.
// Prints a table; --out FILE writes the JSON for bench/results/.
#include "actors/engine.hpp"
#include "bench/common/machine_info.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/model/model_loader.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace pensieve;

namespace {

struct Args {
  std::string model = "../shared/models/tiny-llama-f16.gguf";
  std::int64_t kv_device_mb = 1;
  std::int32_t conversations = 120;
  std::int32_t prompt_words = 74;  // with the number: 124 tokens a conversation, 4 blocks of 32
  std::int32_t max_tokens = 16;
  std::vector<std::string> dtypes = {"f32", "f16", "q8_0"};
  std::optional<std::string> out;
  std::string command;
};

const char* usage =
    "kv-capacity [--model FILE] [--kv-device-mb MB] [--conversations N] [--prompt-words W]\n"
    "            [--max-tokens N] [--dtypes f32,f16,q8_0] [--out FILE.json]\n";

struct Measured {
  std::string dtype;
  std::int32_t num_blocks = 0, used_blocks = 0, cached_conversations = 0;
  std::uint64_t evicted_conversations = 0;
  std::int64_t tokens_per_conversation = 0;  // prompt + completion of one turn
  double whole_conversations = 0;  // used blocks / blocks of one conversation
};

asio::awaitable<actors::TurnResult> one_turn(actors::Engine& engine, std::string id, std::string text,
                                             std::int32_t max_tokens) {
  actors::TurnRequest request;
  request.tenant = "bench";
  request.conversation = std::move(id);
  request.messages = {{"user", std::move(text)}};
  request.sampling.temperature = 0.0f;
  request.sampling.max_tokens = max_tokens;
  request.sampling.ignore_eos = true;
  auto stream = engine.start(co_await asio::this_coro::executor, std::move(request));
  if (!stream) co_return stream.error();
  co_return co_await actors::drain_turn(std::move(*stream),
                                        [](const actors::TurnDelta&) -> asio::awaitable<bool> { co_return true; });
}

Result<Measured> measure(const Args& a, kv::KvDType dtype) {
  auto weights = model::load_model(a.model);
  if (!weights) return weights.error();
  actors::EngineOptions o;
  o.n_threads = 2;
  o.kv_dtype = dtype;
  o.kv_cache_mb = a.kv_device_mb;
  o.kv_host_mb = 0;
  auto engine = actors::Engine::create(std::move(*weights), o);
  if (!engine) return engine.error();
  Measured m;
  m.dtype = kv::kv_dtype_name(dtype);
  asio::io_context io;
  for (std::int32_t c = 0; c < a.conversations; ++c) {
    // Different words per conversation, the same length. The number leads
    // (four digits: one token each) so that no two conversations share a
    // first block: since prefix sharing across a namespace's conversations
    // (issue 21), identical leading blocks would be held once and the pool
    // would hold more conversations than its blocks (2026-12-06).
    char number[16];
    std::snprintf(number, sizeof number, "%04d: ", int(c));
    std::string text = number;
    for (std::int32_t w = 0; w < a.prompt_words; ++w) text += (w % 7 == c % 7 ? "river " : "stone ");
    auto f = asio::co_spawn(io, one_turn(**engine, "c" + std::to_string(c), text, a.max_tokens), asio::use_future);
    io.restart();
    io.run();
    const auto r = f.get();
    if (!r) return fail("turn of c" + std::to_string(c) + ": " + r.error().message);
    m.tokens_per_conversation = r->prompt_tokens + r->completion_tokens;
  }
  auto s = asio::co_spawn(io, (*engine)->stats(), asio::use_future);
  io.restart();
  io.run();
  const actors::SchedulerStats stats = s.get();
  m.num_blocks = stats.num_blocks;
  m.used_blocks = stats.num_blocks - stats.free_blocks;
  m.cached_conversations = stats.cached_conversations;
  m.evicted_conversations = stats.evicted_conversations;
  const std::int64_t bt = (*engine)->options().kv_block_tokens;
  const std::int64_t blocks_per_conversation = (m.tokens_per_conversation + bt - 1) / bt;
  m.whole_conversations = double(m.used_blocks) / double(blocks_per_conversation);
  return m;
}

std::optional<Args> parse(int argc, char** argv) {
  Args a;
  for (int i = 0; i < argc; ++i) a.command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return std::nullopt;
    const std::string v = argv[++i];
    if (arg == "--model") a.model = v;
    else if (arg == "--kv-device-mb") a.kv_device_mb = std::stoll(v);
    else if (arg == "--conversations") a.conversations = std::stoi(v);
    else if (arg == "--prompt-words") a.prompt_words = std::stoi(v);
    else if (arg == "--max-tokens") a.max_tokens = std::stoi(v);
    else if (arg == "--out") a.out = v;
    else if (arg == "--dtypes") {
      a.dtypes.clear();
      for (std::size_t at = 0; at <= v.size();) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        a.dtypes.push_back(v.substr(at, comma - at));
        at = comma + 1;
      }
    } else {
      return std::nullopt;
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = parse(argc, argv);
  if (!args) {
    std::fputs(usage, stderr);
    return 2;
  }
  json::array rows;
  std::optional<double> f16_whole;
  std::printf("%-6s %8s %8s %10s %14s %10s\n", "dtype", "blocks", "used", "cached", "whole convs", "vs f16");
  std::vector<Measured> all;
  for (const auto& name : args->dtypes) {
    const auto dtype = kv::kv_dtype_from_name(name);
    if (!dtype) {
      std::fprintf(stderr, "kv-capacity: '%s' is not a KV dtype\n", name.c_str());
      return 2;
    }
    auto m = measure(*args, *dtype);
    if (!m) {
      std::fprintf(stderr, "kv-capacity: %s: %s\n", name.c_str(), m.error().message.c_str());
      return 1;
    }
    if (*dtype == kv::KvDType::f16) f16_whole = m->whole_conversations;
    all.push_back(*m);
  }
  for (const auto& m : all) {
    const double vs = f16_whole && *f16_whole > 0 ? m.whole_conversations / *f16_whole : 0.0;
    std::printf("%-6s %8d %8d %10d %14.2f %10.3f\n", m.dtype.c_str(), m.num_blocks, m.used_blocks,
                m.cached_conversations, m.whole_conversations, vs);
    rows.push_back(json::object{{"kv_dtype", m.dtype},
                                {"num_blocks", m.num_blocks},
                                {"used_blocks", m.used_blocks},
                                {"cached_conversations", m.cached_conversations},
                                {"evicted_conversations", m.evicted_conversations},
                                {"tokens_per_conversation", m.tokens_per_conversation},
                                {"whole_conversations_resident", m.whole_conversations},
                                {"whole_conversations_vs_f16", vs}});
  }
  const auto machine = bench::machine_info();
  json::object result{{"benchmark", "kv-capacity"},
                      {"command", args->command},
                      {"model", args->model},
                      {"kv_device_mb", args->kv_device_mb},
                      {"conversations_sent", args->conversations},
                      {"rows", rows},
                      {"machine", json::object{{"cpu", machine.cpu_model},
                                               {"hardware_threads", machine.hardware_threads},
                                               {"vector_extensions", machine.vector_extensions},
                                               {"load_average", bench::load_average()}}}};
  if (args->out) {
    std::ofstream f(*args->out);
    f << json::serialize(result) << "\n";
  }
  return 0;
}
