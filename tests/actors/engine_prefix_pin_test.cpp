// Pinned prefixes end to end (TurnRequest::pin_ttl_s, what cache_control
// and POST /admin/prefix-cache/pin ask for): on a device-only cache too
// small for every request's KV, a pinned prompt stays cached through the
// pressure that evicts an unpinned one and is a hit afterwards; once its
// time has passed it is evicted like any other; a pin gives no hit to
// another tenant or salt; a pin past the cap is refused; and once the
// cache is cleared every block is free.
#include "tests/actors/engine_fixture.hpp"

#include <chrono>
#include <thread>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

constexpr std::int32_t kBlockTokens = 8;
constexpr std::int32_t kDeviceBlocks = 64;

std::unique_ptr<actors::Engine> make_engine(double pin_cap_share = 0.5) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.scheduler.max_batch_tokens = 256;
  o.kv_block_tokens = kBlockTokens;
  o.kv_device_blocks = kDeviceBlocks;
  o.kv_host_mb = 0;  // no tiers: the coldest unpinned path is evicted whole
  o.kv_cache.pin_cap_share = pin_cap_share;
  // Least recently used first: the unpinned prompt, asked before the
  // pressure, is the first path the pressure evicts.
  o.kv_cache.eviction_policy = actors::EvictionPolicyKind::lru;
  auto e = actors::Engine::create(stories_model(), o);
  REQUIRE(e.has_value());
  return std::move(*e);
}

asio::awaitable<actors::TurnResult> ask(actors::Engine& engine, std::vector<model::ChatMessage> messages,
                                        std::int64_t pin_ttl_s = 0, std::string tenant = "t",
                                        std::optional<std::string> salt = std::nullopt) {
  actors::TurnRequest request = stateless_request(std::move(messages), greedy(8));
  request.sampling.ignore_eos = true;
  request.tenant = std::move(tenant);
  request.cache_salt = std::move(salt);
  request.pin_ttl_s = pin_ttl_s;
  auto stream = engine.start(co_await asio::this_coro::executor, std::move(request));
  REQUIRE(stream.has_value());
  co_return co_await actors::drain_turn(std::move(*stream), [](const actors::TurnDelta&) -> asio::awaitable<bool> {
    co_return true;
  });
}

std::int32_t cached(asio::io_context& io, actors::Engine& engine, std::vector<model::ChatMessage> messages,
                    std::int64_t pin_ttl_s = 0, std::string tenant = "t",
                    std::optional<std::string> salt = std::nullopt) {
  const auto r = run(io, ask(engine, std::move(messages), pin_ttl_s, std::move(tenant), std::move(salt)));
  REQUIRE(r.has_value());
  return r->cached_tokens;
}

const std::vector<model::ChatMessage> kPinned = {
    {"system", "You are a helpful assistant who answers briefly and kindly, in plain words."},
    {"user", "Once upon a time there was a little girl who liked to play in the park."}};
// No system message: its first block is not the pinned prompt's. (A
// device-only cache evicts a path whose first blocks are pinned down to them.)
const std::vector<model::ChatMessage> kUnpinned = {
    {"user", "Tom the cat lives in a small house by the sea. What did Tom find on the beach one morning?"}};

// Distinct prompts whose KV together is more than the device holds.
void pressure(asio::io_context& io, actors::Engine& engine) {
  for (int i = 0; i < 16; ++i) {
    std::string text = "Story " + std::to_string(i) + ":";
    for (int j = 0; j < 6; ++j) text += " the dog number " + std::to_string(i * 100 + j) + " ran far away.";
    (void)cached(io, engine, {{"user", text}});
  }
}

}  // namespace

TEST_CASE("a pinned prompt survives the pressure that evicts an unpinned one and is a hit afterwards",
          "[engine][prefix_cache][pin]") {
  asio::io_context io;
  auto engine = make_engine();
  const auto first = run(io, ask(*engine, kPinned, 600));
  REQUIRE(first.has_value());
  CHECK(first->cached_tokens == 0);
  const std::int32_t prompt = first->prompt_tokens;
  const auto pinned = run(io, engine->stats());
  CHECK(pinned.pinned_blocks == prompt / kBlockTokens);
  CHECK(pinned.tiers.pinned_chunks == prompt / kBlockTokens);
  CHECK(pinned.pin_cap_blocks == kDeviceBlocks / 2);
  CHECK(cached(io, *engine, kUnpinned) == 0);
  pressure(io, *engine);
  const auto pressed = run(io, engine->stats());
  CHECK(pressed.evicted_conversations > 0);
  // Its pinned full blocks (the partial last block is not pinned).
  CHECK(cached(io, *engine, kPinned) == prompt / kBlockTokens * kBlockTokens);
  CHECK(cached(io, *engine, kUnpinned) == 0);  // evicted
  // No other namespace sees the pinned prefix.
  CHECK(cached(io, *engine, kPinned, 0, "other") == 0);
  CHECK(cached(io, *engine, kPinned, 0, "t", "salt") == 0);
  engine->clear_prefix_cache();
  const auto cleared = run(io, engine->stats());
  CHECK(cleared.free_blocks == cleared.num_blocks);
  CHECK(cleared.tiers.unnamed_paths == 0);
}

TEST_CASE("a pin in one tenant and salt is no hit in another, and its own namespace hits",
          "[engine][prefix_cache][pin]") {
  asio::io_context io;
  auto engine = make_engine();
  CHECK(cached(io, *engine, kPinned, 600, "a", "x") == 0);
  pressure(io, *engine);
  CHECK(cached(io, *engine, kPinned, 0, "b", "x") == 0);
  CHECK(cached(io, *engine, kPinned, 0, "a", "y") == 0);
  CHECK(cached(io, *engine, kPinned, 0, "a") == 0);
  const auto hit = run(io, ask(*engine, kPinned, 0, "a", "x"));
  REQUIRE(hit.has_value());
  CHECK(hit->cached_tokens == hit->prompt_tokens / kBlockTokens * kBlockTokens);
}

TEST_CASE("after its time a pinned prompt is evicted like any other", "[engine][prefix_cache][pin]") {
  asio::io_context io;
  auto engine = make_engine();
  CHECK(cached(io, *engine, kPinned, 1) == 0);
  CHECK(run(io, engine->stats()).pinned_blocks > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  pressure(io, *engine);
  CHECK(run(io, engine->stats()).pinned_blocks == 0);
  CHECK(cached(io, *engine, kPinned) == 0);
  engine->clear_prefix_cache();
  const auto cleared = run(io, engine->stats());
  CHECK(cleared.free_blocks == cleared.num_blocks);
}

TEST_CASE("a pin past the cap of the device's blocks is refused naming cache_control",
          "[engine][prefix_cache][pin]") {
  asio::io_context io;
  auto engine = make_engine(0.1);  // 6 of 64 blocks: 48 tokens
  std::string text = "A long prompt:";
  for (int j = 0; j < 12; ++j) text += " the cat number " + std::to_string(j) + " sat down.";
  const auto refused = run(io, ask(*engine, {{"user", text}}, 600));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().kind == actors::TurnErrorKind::invalid_request);
  CHECK(refused.error().param == "cache_control");
  CHECK(refused.error().message.find("cap") != std::string::npos);
  const auto stats = run(io, engine->stats());
  CHECK(stats.refused_pins == 1);
  CHECK(stats.pinned_blocks == 0);
  // Within the cap it is pinned; the same prompt again adds no blocks.
  const auto small = run(io, ask(*engine, {{"user", "Hi."}}, 600));
  REQUIRE(small.has_value());
  CHECK(run(io, engine->stats()).pinned_blocks == small->prompt_tokens / kBlockTokens);
  engine->clear_prefix_cache();
  const auto cleared = run(io, engine->stats());
  CHECK(cleared.free_blocks == cleared.num_blocks);
}

TEST_CASE("unpinning a namespace before its time lets pressure evict its prompt and keeps the other pins",
          "[engine][prefix_cache][pin]") {
  asio::io_context io;
  auto engine = make_engine(0.9);  // room for both pins
  const auto a = run(io, ask(*engine, kPinned, 600, "a", "x"));
  const auto b = run(io, ask(*engine, kPinned, 600, "b"));
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  const std::int64_t blocks = a->prompt_tokens / kBlockTokens;
  CHECK(run(io, engine->stats()).pinned_blocks == 2 * blocks);
  CHECK(run(io, engine->unpin_prefixes(std::string("a"), std::nullopt)) == 0);  // another namespace: no salt
  CHECK(run(io, engine->unpin_prefixes(std::string("a"), std::string("x"))) == blocks);
  CHECK(run(io, engine->stats()).pinned_blocks == blocks);
  pressure(io, *engine);
  CHECK(cached(io, *engine, kPinned, 0, "a", "x") == 0);  // evicted once unpinned
  CHECK(cached(io, *engine, kPinned, 0, "b") == blocks * kBlockTokens);
  CHECK(run(io, engine->unpin_prefixes(std::nullopt, std::nullopt)) == blocks);
  CHECK(run(io, engine->stats()).pinned_blocks == 0);
  engine->clear_prefix_cache();
  const auto cleared = run(io, engine->stats());
  CHECK(cleared.free_blocks == cleared.num_blocks);
}
