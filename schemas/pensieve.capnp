@0xefbbb1eab2e98a25;
# The Cap'n Proto RPC interface for internal clients (pensieve-cli, services
# in the same data centre). net/rpc_server.hpp serves it; net/README.md
# documents it. Conversations live in the server's tenant for RPC clients.
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("pensieve::rpc::schema");

struct Message {
  role @0 :Text;     # "system", "user", "assistant"
  content @1 :Text;
}

# The sampling knobs of one turn. Defaults match the engine's.
struct SamplingParams {
  temperature @0 :Float32 = 1.0;   # below 1e-5: greedy
  topK @1 :Int32 = 0;              # 0: off
  topP @2 :Float32 = 1.0;          # 1: off
  minP @3 :Float32 = 0.0;
  seed @4 :UInt64 = 0;
  maxTokens @5 :Int32 = 16;
  minTokens @6 :Int32 = 0;
  ignoreEos @7 :Bool = false;
  stop @8 :List(Text);             # stop strings
  logprobs @9 :Bool = false;       # deltas carry their tokens' logprobs
}

# Text released to the client (whole UTF-8 characters) and the tokens it came from.
struct Delta {
  text @0 :Text;
  tokens @1 :List(Int32);
  logprobs @2 :List(Float32);      # empty unless SamplingParams.logprobs
}

enum FinishReason {
  none @0;     # cancelled before any finish
  stop @1;     # EOS, a stop token or a stop string
  length @2;   # maxTokens or the context
}

struct TurnSummary {
  finish @0 :FinishReason;
  promptTokens @1 :Int32;          # tokens the turn added before generating
  completionTokens @2 :Int32;
  cachedTokens @3 :Int32;          # prompt tokens served from the KV cache
  cancelled @4 :Bool;
  truncatedTokens @5 :Int32;       # history tokens dropped to fit the context (--context-overflow truncate)
}

struct Stats {
  iterations @0 :UInt64;
  preemptions @1 :UInt64;
  evictedConversations @2 :UInt64;
  refusedOverloaded @3 :UInt64;
  prefillTokens @4 :Int64;
  decodeTokens @5 :Int64;
  reusedTokens @6 :Int64;
  waiting @7 :Int32;
  running @8 :Int32;
  cachedConversations @9 :Int32;
  freeBlocks @10 :Int32;
  numBlocks @11 :Int32;
  model @12 :Text;
}

# Implemented by the client: receives a turn's text as it is generated.
# Flow control: the server keeps at most a few deltas() calls unanswered
# (RpcServerOptions.max_deltas_in_flight) and coalesces what the engine
# generates meanwhile into the next batch, so a slow sink gets fewer, larger
# batches and the server never queues more than the turn's own text.
# Throwing from deltas() cancels the turn.
interface TokenSink {
  deltas @0 (batch :List(Delta)) -> ();
  # Called once after the last deltas() call has returned.
  done @1 (summary :TurnSummary) -> ();
}

# A turn in progress. Dropping every reference cancels it.
interface Turn {
  # Resolves when the turn has ended and the sink has received everything;
  # a refused or failed turn throws here.
  result @0 () -> (summary :TurnSummary);
  # Returns once the engine has been told: generation stops at its next
  # iteration and result() reports cancelled (unless the turn had ended).
  cancel @1 () -> ();
}

# Errors are RPC exceptions whose description starts with the kind:
# "not found: ...", "invalid request: ...", "overloaded: ..." (type
# OVERLOADED), "internal: ...", "unauthenticated: ...".
#
# Auth: on a server with API keys the bootstrap capability answers only
# login(); every other call throws "unauthenticated: ...". login(key) returns
# a Pensieve bound to the key's tenant (its conversations only; another
# tenant's id is "not found"), or throws "unauthenticated: invalid API key".
# On a server without keys, login() with any key returns the open service.
interface Pensieve {
  # id: the client's choice ([A-Za-z0-9._:-], 1-128 characters); empty: a fresh one.
  createConversation @0 (id :Text) -> (id :Text);
  # The stored history (resume a conversation).
  getConversation @1 (id :Text) -> (history :List(Message), tokens :Int32, turns :Int32);
  deleteConversation @2 (id :Text) -> ();
  listConversations @3 () -> (ids :List(Text));
  # Appends `content` as a user message and generates the reply into `sink`.
  # Returns once the engine accepted the turn; pipeline turn.result() to wait.
  sendTurn @4 (conversation :Text, content :Text, params :SamplingParams, sink :TokenSink)
      -> (turn :Turn);
  stats @5 () -> (stats :Stats);
  # The service bound to the tenant of `key` (see Auth above).
  login @6 (key :Text) -> (service :Pensieve);
}
