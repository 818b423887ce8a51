#include "tools/pensieve-cli/cli_options.hpp"

#include <charconv>

namespace pensieve::cli {

namespace {

template <class T>
Result<T> number(const std::string& flag, const std::string& value) {
  T out{};
  const auto* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end) return fail(flag + ": not a number: '" + value + "'");
  return out;
}

}  // namespace

std::string cli_usage() {
  return "usage: pensieve-cli [--host H] [--port P] COMMAND\n"
         "  chat [--conversation ID] [--max-tokens N] [--temperature T] [--seed S]\n"
         "                     each line of stdin is a turn; the reply streams to stdout\n"
         "  list               conversation ids\n"
         "  history ID         the conversation's messages\n"
         "  delete ID          delete a conversation\n"
         "  stats              the scheduler's counters\n"
         "  --host H           server address (default 127.0.0.1)\n"
         "  --port P           server RPC port (default 8081)\n"
         "  --api-key KEY      log in with KEY (a server started with --api-key / --api-keys)\n";
}

Result<CliOptions> parse_cli(const std::vector<std::string>& args) {
  CliOptions o;
  std::vector<std::string> positional;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      return o;
    }
    if (a.rfind("--", 0) != 0) {
      positional.push_back(a);
      continue;
    }
    if (i + 1 >= args.size()) return fail(a + ": needs a value");
    const auto& v = args[++i];
    if (a == "--host") {
      o.host = v;
    } else if (a == "--port") {
      auto p = number<std::uint16_t>(a, v);
      if (!p) return p.error();
      o.port = *p;
    } else if (a == "--api-key") {
      o.api_key = v;
    } else if (a == "--conversation") {
      o.conversation = v;
    } else if (a == "--max-tokens") {
      auto n = number<std::int32_t>(a, v);
      if (!n) return n.error();
      o.max_tokens = *n;
    } else if (a == "--temperature") {
      auto t = number<float>(a, v);
      if (!t) return t.error();
      o.temperature = *t;
    } else if (a == "--seed") {
      auto s = number<std::uint64_t>(a, v);
      if (!s) return s.error();
      o.seed = *s;
    } else {
      return fail("unknown flag " + a);
    }
  }
  if (positional.empty()) return fail("no command (chat, list, history, delete, stats)");
  o.command = positional[0];
  const bool needs_id = o.command == "history" || o.command == "delete";
  if (needs_id) {
    if (positional.size() != 2) return fail(o.command + " needs a conversation id");
    o.conversation = positional[1];
  } else if (o.command == "chat" || o.command == "list" || o.command == "stats") {
    if (positional.size() != 1) return fail(o.command + ": unexpected argument " + positional[1]);
  } else {
    return fail("unknown command " + o.command);
  }
  return o;
}

}  // namespace pensieve::cli
