// pensieve-cli's commands (its library) against a real RpcServer, driven
// non-interactively: stdin from a string, stdout and stderr captured.
#include "tests/net/rpc_fixture.hpp"
#include "tools/pensieve-cli/cli_commands.hpp"
#include "tools/pensieve-cli/cli_options.hpp"

#include <sstream>

using namespace pensieve;
using namespace pensieve::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};

CliRun cli_run(std::uint16_t port, std::vector<std::string> args, const std::string& stdin_text = "") {
  std::vector<std::string> all{"--port", std::to_string(port)};
  all.insert(all.end(), args.begin(), args.end());
  auto options = cli::parse_cli(all);
  REQUIRE(options.has_value());
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  CliRun run;
  run.code = cli::run_cli(*options, in, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("pensieve-cli chats from a pipe then lists and shows and deletes the conversation", "[cli][rpc]") {
  RpcFixture f;
  const auto port = f.server->port();
  auto chat = cli_run(port, {"chat", "--conversation", "story", "--max-tokens", "8", "--temperature", "0"},
                  "Once upon a time\n\nthe end\n");
  // --conversation names an existing one: it does not exist yet.
  CHECK(chat.code == 1);
  CHECK_THAT(chat.err, Contains("not found: no conversation 'story'"));

  chat = cli_run(port, {"chat", "--max-tokens", "8", "--temperature", "0"}, "Once upon a time\n\nthe end\n");
  REQUIRE(chat.code == 0);
  const auto err = lines(chat.err);
  REQUIRE(err.size() == 3);  // the id, then one usage line per turn (the empty line is no turn)
  REQUIRE_THAT(err[0], StartsWith("conversation "));
  const std::string id = err[0].substr(std::string("conversation ").size());
  CHECK_THAT(err[1], Contains("(0 cached)"));
  CHECK_THAT(err[2], Contains("8 completion tokens"));
  CHECK_THAT(err[2], !Contains("(0 cached)"));
  const auto replies = lines(chat.out);
  REQUIRE(replies.size() == 2);

  auto list = cli_run(port, {"list"});
  CHECK(list.code == 0);
  CHECK(list.out == id + "\n");

  auto history = cli_run(port, {"history", id});
  CHECK(history.code == 0);
  const auto h = lines(history.out);
  REQUIRE(h.size() >= 4);
  CHECK(h[0] == "user: Once upon a time");
  CHECK_THAT(history.out, Contains("user: the end"));

  auto resumed = cli_run(port, {"chat", "--conversation", id, "--max-tokens", "4", "--temperature", "0"}, "more\n");
  CHECK(resumed.code == 0);
  CHECK_THAT(resumed.err, Contains("conversation " + id + " (4 messages)"));

  auto stats = cli_run(port, {"stats"});
  CHECK(stats.code == 0);
  CHECK_THAT(stats.out, Contains("running 0\n"));
  CHECK_THAT(stats.out, Contains("decode_tokens "));

  CHECK(cli_run(port, {"delete", id}).code == 0);
  auto gone = cli_run(port, {"history", id});
  CHECK(gone.code == 1);
  CHECK(gone.err == "pensieve-cli: not found: no conversation '" + id + "'\n");
  CHECK(cli_run(port, {"list"}).out.empty());
}

TEST_CASE("pensieve-cli refuses bad command lines with a reason", "[cli]") {
  CHECK_FALSE(cli::parse_cli({}).has_value());
  CHECK_FALSE(cli::parse_cli({"history"}).has_value());
  CHECK_FALSE(cli::parse_cli({"frobnicate"}).has_value());
  CHECK_FALSE(cli::parse_cli({"--port", "70000", "list"}).has_value());
  CHECK_FALSE(cli::parse_cli({"chat", "--max-tokens"}).has_value());
  auto ok = cli::parse_cli({"--host", "10.0.0.1", "--port", "9000", "delete", "x"});
  REQUIRE(ok.has_value());
  CHECK(ok->host == "10.0.0.1");
  CHECK(ok->port == 9000);
  CHECK(ok->command == "delete");
  CHECK(ok->conversation == "x");
}
