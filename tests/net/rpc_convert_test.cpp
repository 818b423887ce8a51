// The RPC service's conversion of a client's sendTurn message
// (net/rpc_convert.hpp), without a server: the inputs the fuzz target
// (tests/net/fuzz/fuzz_rpc_turn.cpp) is seeded with, as exact outcomes.
#include "net/rpc_convert.hpp"

#include <capnp/serialize.h>
#include <catch2/catch.hpp>

#include <string>

using namespace pensieve;
namespace schema = pensieve::rpc::schema;

namespace {

schema::Pensieve::SendTurnParams::Builder turn(capnp::MallocMessageBuilder& message, const std::string& content,
                                               unsigned stops) {
  auto params = message.initRoot<schema::Pensieve::SendTurnParams>();
  params.setConversation("c1");
  params.setContent(kj::StringPtr(content.c_str(), content.size()));
  auto sampling = params.initParams();
  sampling.setTemperature(0.5f);
  sampling.setMaxTokens(32);
  sampling.setSeed(9);
  auto stop = sampling.initStop(stops);
  for (unsigned i = 0; i < stops; ++i) stop.set(i, "END");
  return params;
}

}  // namespace

TEST_CASE("an rpc turn message converts to the tenant's turn with its sampling as sent", "[rpc]") {
  capnp::MallocMessageBuilder message;
  auto r = net::turn_from_rpc(turn(message, "Hello", 2).asReader(), "acme", net::RequestLimits{});
  REQUIRE(r.has_value());
  CHECK(r->tenant == "acme");
  CHECK(r->conversation == "c1");
  CHECK_FALSE(r->create_conversation);
  REQUIRE(r->messages.size() == 1);
  CHECK(r->messages[0].role == "user");
  CHECK(r->messages[0].content == "Hello");
  CHECK(r->sampling.temperature == 0.5f);
  CHECK(r->sampling.max_tokens == 32);
  CHECK(r->sampling.seed == 9);
  CHECK(r->sampling.stop_strings == std::vector<std::string>{"END", "END"});
}

TEST_CASE("an rpc turn with a stop list far over the limit is refused by its length, naming stop", "[rpc]") {
  capnp::MallocMessageBuilder message;
  auto r = net::turn_from_rpc(turn(message, "Hi", 5000).asReader(), "t", net::RequestLimits{});
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().kind == actors::TurnErrorKind::invalid_request);
  CHECK(r.error().param == "stop");
  CHECK(r.error().message == "'stop' allows at most 4 strings");
  CHECK(std::string(net::rpc_exception(r.error()).getDescription().cStr()) ==
        "invalid request: 'stop' allows at most 4 strings");
}

TEST_CASE("an rpc turn with empty content or content over the HTTP body limit is refused", "[rpc]") {
  capnp::MallocMessageBuilder empty;
  auto e = net::turn_from_rpc(turn(empty, "", 0).asReader(), "t", net::RequestLimits{});
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().message == "content must not be empty");
  capnp::MallocMessageBuilder big;
  auto b = net::turn_from_rpc(turn(big, std::string(net::rpc_max_content_bytes + 1, 'a'), 0).asReader(), "t",
                              net::RequestLimits{});
  REQUIRE_FALSE(b.has_value());
  CHECK(b.error().param == "content");
  CHECK(b.error().message == "content is over 1048576 bytes");
}

TEST_CASE("an rpc message larger than the connections' read limit throws instead of being read", "[rpc]") {
  capnp::MallocMessageBuilder within;
  turn(within, std::string(net::rpc_max_content_bytes, 'a'), 4);
  auto fits = capnp::messageToFlatArray(within);
  capnp::FlatArrayMessageReader read_fits(fits, net::rpc_reader_options());
  CHECK(net::turn_from_rpc(read_fits.getRoot<schema::Pensieve::SendTurnParams>(), "t", net::RequestLimits{}).has_value());

  capnp::MallocMessageBuilder over;
  turn(over, std::string(4 * net::rpc_max_content_bytes, 'a'), 0);
  auto flat = capnp::messageToFlatArray(over);
  capnp::FlatArrayMessageReader reader(flat, net::rpc_reader_options());
  CHECK_THROWS_AS(net::turn_from_rpc(reader.getRoot<schema::Pensieve::SendTurnParams>(), "t", net::RequestLimits{}),
                  kj::Exception);
}
