// libFuzzer target: any bytes as a text message of the WebSocket chat
// protocol (net/ws_chat_protocol.hpp), through the parser the chat session
// calls (net/ws_chat_session.cpp), then what the server would write back:
// the error, or the JSON that echoes the message's strings. A message that
// parses has content; ASan and UBSan catch anything else.
#include "net/ws_chat_protocol.hpp"
#include "tests/gpu/fuzz/seed_hook.hpp"

#include <boost/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

using namespace pensieve::net;

void check(bool ok) {
  if (!ok) std::abort();  // a broken invariant: libFuzzer keeps the input
}

// What the server writes must be JSON again, whatever bytes it echoes.
void check_json(const std::string& text) {
  boost::system::error_code ec;
  (void)boost::json::parse(text, ec);
  check(!ec);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);  // a private copy (ASan redzone)
  auto parsed = parse_ws_message(text);
  if (!parsed) {
    check(!parsed.error().code.empty());
    check_json(ws_error_json(parsed.error()));
    return 0;
  }
  if (const auto* send = std::get_if<WsSend>(&*parsed)) {
    // Bounds are the adapter's (validate_turn, as for every front end); the
    // parser guarantees what a session needs before that.
    check(!send->content.empty());
    check_json(ws_delta_json(send->content));
  } else if (const auto* open = std::get_if<WsOpen>(&*parsed)) {
    check_json(ws_opened_json(open->conversation.value_or(""), "m", {{"user", "hi"}}));
  } else if (const auto* del = std::get_if<WsDelete>(&*parsed)) {
    check_json(ws_deleted_json(del->conversation));
  }
  return 0;
}

// Writes the seed corpus into dir: one message of every type, and a few
// the server refuses.
int pensieve_fuzz_write_seeds(const std::string& dir) {
  const char* seeds[] = {
      R"({"type":"open"})",
      R"({"type":"open","conversation":"conv_0123"})",
      R"({"type":"send","content":"Hello there","max_tokens":32,"temperature":0.7,"ignore_eos":true})",
      R"({"type":"send","content":"Hi"})",
      R"({"type":"cancel"})",
      R"({"type":"list"})",
      R"({"type":"delete","conversation":"conv_0123"})",
      R"({"type":"send","content":"","max_tokens":0})",
      R"({"type":7})",
      R"(["open"])",
  };
  int i = 0;
  for (const char* s : seeds) {
    std::ofstream(dir + "/seed" + std::to_string(i++) + ".json") << s;
  }
  return 0;
}
