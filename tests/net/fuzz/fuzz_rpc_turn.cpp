// libFuzzer target: any bytes as a Cap'n Proto message a client sent the
// RPC service (schemas/pensieve.capnp), through the conversions the service
// makes of it (net/rpc_convert.hpp): the message read with the limits the
// server's connections use, its root as sendTurn's parameters (turn_from_rpc)
// and as the id- and key-carrying parameters of the other calls, so one
// input is also each struct read as another's (wrong pointers, wrong
// unions). A malformed message is a kj::Exception, which the RPC system
// answers the call with; a turn the conversion accepts must be within the
// bounds every front end enforces. ASan and UBSan catch anything else.
#include "net/rpc_convert.hpp"
#include "tests/gpu/fuzz/seed_hook.hpp"

#include <capnp/serialize.h>
#include <kj/array.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

using namespace pensieve;
namespace schema = rpc::schema;

void check(bool ok) {
  if (!ok) std::abort();  // a broken invariant: libFuzzer keeps the input
}

const std::string tenant = "fuzz-tenant";

net::RequestLimits limits() {
  net::RequestLimits l;
  l.max_stop_strings = 4;
  l.max_tokens_ceiling = 4096;
  return l;
}

void check_turn(const actors::TurnRequest& r, const net::RequestLimits& l) {
  check(r.tenant == tenant && !r.create_conversation);
  check(r.messages.size() == 1 && r.messages[0].role == "user");
  check(!r.messages[0].content.empty() && r.messages[0].content.size() <= net::rpc_max_content_bytes);
  const auto& s = r.sampling;
  check(s.stop_strings.size() <= l.max_stop_strings);
  for (const auto& stop : s.stop_strings) check(!stop.empty());
  check(s.max_tokens >= 1 && s.max_tokens <= l.max_tokens_ceiling && s.min_tokens <= s.max_tokens);
  check(std::isfinite(s.temperature) && s.temperature >= 0 && s.temperature <= 2);
  check(s.top_p > 0 && s.top_p <= 1 && s.min_p >= 0 && s.min_p <= 1 && s.top_k >= 0);
}

void convert(capnp::MessageReader& message) {
  const auto l = limits();
  auto turn = net::turn_from_rpc(message.getRoot<schema::Pensieve::SendTurnParams>(), tenant, l);
  if (turn) {
    check_turn(*turn, l);
  } else {
    check(turn.error().kind == actors::TurnErrorKind::invalid_request && !turn.error().message.empty());
    // The exception the client gets.
    check(std::string(net::rpc_exception(turn.error()).getDescription().cStr()).starts_with("invalid request: "));
  }
  // The other calls read one text field each, as createConversation does.
  auto id = message.getRoot<schema::Pensieve::CreateConversationParams>().getId();
  volatile std::size_t sink = std::string(id.cStr(), id.size()).size();
  auto key = message.getRoot<schema::Pensieve::LoginParams>().getKey();
  sink = std::string(key.cStr(), key.size()).size();
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Whole words, in a private aligned copy (a read past the end lands in ASan's redzone).
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  if (words.size() == 0) return 0;
  std::memcpy(words.begin(), data, words.size() * sizeof(capnp::word));
  try {
    capnp::FlatArrayMessageReader message(words, net::rpc_reader_options());
    convert(message);
  } catch (const kj::Exception& e) {
    check(e.getDescription().size() > 0);  // malformed: the call is answered with this
  }
  return 0;
}

// Writes the seed corpus into dir: calls the service accepts, ones it
// refuses (bounds, a stop list far over the limit, an empty content) and a
// root of the wrong kind, so fuzzing starts inside the schema.
int pensieve_fuzz_write_seeds(const std::string& dir) {
  int n = 0;
  auto write = [&](capnp::MessageBuilder& message) {
    auto flat = capnp::messageToFlatArray(message);
    std::ofstream f(dir + "/seed" + std::to_string(n++), std::ios::binary);
    f.write(reinterpret_cast<const char*>(flat.begin()), std::streamsize(flat.asBytes().size()));
  };
  auto turn = [&](const char* content, int stops, float temperature, int max_tokens) {
    capnp::MallocMessageBuilder message;
    auto params = message.initRoot<schema::Pensieve::SendTurnParams>();
    params.setConversation("c1");
    params.setContent(content);
    auto sampling = params.initParams();
    sampling.setTemperature(temperature);
    sampling.setMaxTokens(max_tokens);
    sampling.setTopK(40);
    sampling.setTopP(0.9f);
    sampling.setSeed(7);
    sampling.setLogprobs(true);
    auto stop = sampling.initStop(unsigned(stops));
    for (int i = 0; i < stops; ++i) stop.set(unsigned(i), i % 2 ? "\n" : "END");
    write(message);
  };
  turn("Hello there", 0, 0.0f, 16);
  turn("Tell me more", 2, 0.7f, 64);
  turn("", 0, 1.0f, 16);
  turn("Hi", 5000, 1.0f, 16);
  turn("Hi", 1, 3.0f, 0);
  {
    capnp::MallocMessageBuilder message;
    message.initRoot<schema::Pensieve::CreateConversationParams>().setId("conversation-1");
    write(message);
  }
  {
    capnp::MallocMessageBuilder message;
    message.initRoot<schema::Stats>().setModel("a struct of another kind");
    write(message);
  }
  return 0;
}
