// libFuzzer target: any bytes as the JSON body of POST /v1/chat/completions
// and POST /v1/completions, through the parsers the routes call
// (net/openai_routes.cpp), then the error body a refusal is answered with.
// A request that parses must be within the limits the parsers enforce; ASan
// and UBSan catch anything else.
#include "net/chat_request_json.hpp"
#include "tests/gpu/fuzz/seed_hook.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace {

using namespace pensieve::net;

void check(bool ok) {
  if (!ok) std::abort();  // a broken invariant: libFuzzer keeps the input
}

void check_request(const ChatRequest& r, const RequestLimits& limits) {
  check(r.messages.size() <= limits.max_messages);
  check(r.max_tokens >= 0 && r.max_tokens <= limits.max_tokens_ceiling);
  check(r.stop.size() <= limits.max_stop_strings);
  check(std::isfinite(r.temperature) && std::isfinite(r.top_p) && std::isfinite(r.min_p));
  check(r.top_logprobs >= 0 && r.top_logprobs <= 20);
  check(r.tenant.empty());  // set by the routes, never from the body
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A private copy, so a read past `size` lands in ASan's redzone.
  const std::string body(reinterpret_cast<const char*>(data), size);
  RequestLimits limits;
  limits.max_messages = 8;  // small, so the fuzzer reaches the limit
  for (auto parse : {parse_chat_request, parse_completion_request}) {
    auto r = parse(body, limits);
    if (r) {
      check_request(*r, limits);
    } else {
      check(!r.error().message.empty());
      (void)r.error().to_json();  // the answer echoes parts of the body
    }
  }
  return 0;
}

// Writes the seed corpus into dir: requests the routes accept and a few
// they refuse, so fuzzing starts inside the grammar.
int pensieve_fuzz_write_seeds(const std::string& dir) {
  const char* seeds[] = {
      R"({"model":"m","messages":[{"role":"user","content":"Hi"}]})",
      R"({"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},)"
      R"({"role":"assistant","content":"Hello"},{"role":"user","content":"And?"}],"max_tokens":16,)"
      R"("temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,"seed":7,"stop":["\n","END"],)"
      R"("presence_penalty":0.5,"frequency_penalty":-0.5,"repetition_penalty":1.1,"stream":true,)"
      R"("stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":3,"ignore_eos":false,)"
      R"("conversation":"c1","min_tokens":2})",
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":" there"}]}]})",
      R"({"model":"m","prompt":"Once upon a time","max_tokens":8,"logprobs":2,"stop":"."})",
      R"({"model":"m","prompt":["Once"],"echo":false})",
      R"({"model":"m","messages":[],"n":2})",
      R"({"model":1})",
      R"([1,2,3])",
      R"({"model":"m","messages":[{"role":"tool","content":null}]})",
  };
  int i = 0;
  for (const char* s : seeds) {
    std::ofstream(dir + "/seed" + std::to_string(i++) + ".json") << s;
  }
  return 0;
}
