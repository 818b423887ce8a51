#include "tools/pensieve-cli/cli_commands.hpp"

#include "schemas/pensieve.capnp.h"

#include <capnp/ez-rpc.h>
#include <kj/async.h>

#include <istream>
#include <ostream>
#include <string>

namespace pensieve::cli {

namespace schema = rpc::schema;

namespace {

kj::StringPtr view(const std::string& s) { return kj::StringPtr(s.c_str(), s.size()); }

// Writes deltas as they come.
class PrintingSink final : public schema::TokenSink::Server {
 public:
  explicit PrintingSink(std::ostream& out) : out_(out) {}

 protected:
  kj::Promise<void> deltas(DeltasContext context) override {
    for (auto d : context.getParams().getBatch()) out_.write(d.getText().cStr(), std::streamsize(d.getText().size()));
    out_.flush();
    return kj::READY_NOW;
  }
  kj::Promise<void> done(DoneContext) override { return kj::READY_NOW; }

 private:
  std::ostream& out_;
};

const char* finish_name(schema::FinishReason f) {
  switch (f) {
    case schema::FinishReason::STOP: return "stop";
    case schema::FinishReason::LENGTH: return "length";
    default: return "none";
  }
}

int chat(const CliOptions& o, schema::Pensieve::Client& server, kj::WaitScope& ws, std::istream& in,
         std::ostream& out, std::ostream& err) {
  std::string id;
  if (o.conversation) {
    auto request = server.getConversationRequest();
    request.setId(view(*o.conversation));
    auto history = request.send().wait(ws);
    id = *o.conversation;
    err << "conversation " << id << " (" << history.getHistory().size() << " messages)\n";
  } else {
    auto created = server.createConversationRequest().send().wait(ws);
    id = created.getId().cStr();
    err << "conversation " << id << "\n";
  }
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto request = server.sendTurnRequest();
    request.setConversation(view(id));
    request.setContent(view(line));
    auto params = request.initParams();
    params.setMaxTokens(o.max_tokens);
    params.setTemperature(o.temperature);
    params.setSeed(o.seed);
    request.setSink(kj::heap<PrintingSink>(out));
    auto turn = request.send().getTurn();
    auto result = turn.resultRequest().send().wait(ws);
    auto s = result.getSummary();
    out << "\n";
    out.flush();
    err << "[" << s.getPromptTokens() << " prompt tokens (" << s.getCachedTokens() << " cached), "
        << s.getCompletionTokens() << " completion tokens, finish " << finish_name(s.getFinish()) << "]\n";
  }
  return 0;
}

int run_command(const CliOptions& o, schema::Pensieve::Client& server, kj::WaitScope& ws, std::istream& in,
                std::ostream& out, std::ostream& err) {
  if (o.command == "chat") return chat(o, server, ws, in, out, err);
  if (o.command == "list") {
    auto r = server.listConversationsRequest().send().wait(ws);
    for (auto id : r.getIds()) out << id.cStr() << "\n";
  } else if (o.command == "history") {
    auto request = server.getConversationRequest();
    request.setId(view(*o.conversation));
    auto r = request.send().wait(ws);
    for (auto m : r.getHistory()) out << m.getRole().cStr() << ": " << m.getContent().cStr() << "\n";
  } else if (o.command == "delete") {
    auto request = server.deleteConversationRequest();
    request.setId(view(*o.conversation));
    request.send().wait(ws);
    out << "deleted " << *o.conversation << "\n";
  } else if (o.command == "stats") {
    auto response = server.statsRequest().send().wait(ws);
    auto s = response.getStats();
    out << "model " << s.getModel().cStr() << "\n"
        << "iterations " << s.getIterations() << "\n"
        << "prefill_tokens " << s.getPrefillTokens() << "\n"
        << "decode_tokens " << s.getDecodeTokens() << "\n"
        << "reused_tokens " << s.getReusedTokens() << "\n"
        << "waiting " << s.getWaiting() << "\n"
        << "running " << s.getRunning() << "\n"
        << "cached_conversations " << s.getCachedConversations() << "\n"
        << "free_blocks " << s.getFreeBlocks() << "\n"
        << "num_blocks " << s.getNumBlocks() << "\n";
  }
  return 0;
}

// "remote exception: not found: ..." -> "not found: ..."
std::string reason(const kj::Exception& e) {
  std::string d = e.getDescription().cStr();
  const std::string prefix = "remote exception: ";
  if (d.rfind(prefix, 0) == 0) d.erase(0, prefix.size());
  return d;
}

}  // namespace

int run_cli(const CliOptions& o, std::istream& in, std::ostream& out, std::ostream& err) {
  try {
    capnp::EzRpcClient client(view(o.host), o.port);
    auto server = client.getMain<schema::Pensieve>();
    if (o.api_key) {
      auto login = server.loginRequest();
      login.setKey(view(*o.api_key));
      server = login.send().getService();  // pipelined: a wrong key fails the first call
    }
    return run_command(o, server, client.getWaitScope(), in, out, err);
  } catch (const kj::Exception& e) {
    err << "pensieve-cli: " << reason(e) << "\n";
    return 1;
  }
}

}  // namespace pensieve::cli
