// The official `openai` npm package as a third-party client of the real
// `pensieve` server: starts it (built-in model, free loopback ports, an API
// key), then through the client lists the models, runs a chat completion
// whole and streamed, runs a stateful conversation through the extension
// (an extra body field, then the X-Conversation-Id header) and checks a wrong
// key is refused; finally stops the server with SIGTERM and expects exit 0.
//
// usage: node openai_client.mjs PENSIEVE_BINARY WORK_DIR
import OpenAI from "openai";
import { startServer, stopServer } from "./pensieve_server.mjs";

const [binary, work] = process.argv.slice(2);
const KEY = "sk-pensieve-node-test";
let server = null;

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

const isInt = (v) => Number.isInteger(v) && v >= 0;

async function wholeAndStreamed(client, model) {
  const request = {
    model,
    messages: [{ role: "user", content: "Hello from the openai package" }],
    max_tokens: 12,
    temperature: 0,
    seed: 1,
    ignore_eos: true,  // pensieve's (and vLLM's) extension: a fixed length
  };
  const whole = await client.chat.completions.create(request);
  check(whole.object === "chat.completion" && whole.id.startsWith("chatcmpl-"), "a whole completion is a chat.completion");
  check(whole.model === model && isInt(whole.created), "it names the model and its creation time");
  check(whole.choices.length === 1 && whole.choices[0].index === 0, "it has one choice");
  check(whole.choices[0].message.role === "assistant" && typeof whole.choices[0].message.content === "string",
        "its message is the assistant's text");
  check(whole.choices[0].finish_reason === "length", "it ends by length (ignore_eos, 12 tokens)");
  check(whole.usage.completion_tokens === 12 && whole.usage.prompt_tokens > 0 &&
        whole.usage.total_tokens === whole.usage.prompt_tokens + 12, "its usage adds up");

  const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let text = "";
  let finish = null;
  let usage = null;
  let chunks = 0;
  let role = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.object !== "chat.completion.chunk") throw new Error(`bad chunk object ${chunk.object}`);
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.role) role = choice.delta.role;
      text += choice.delta.content ?? "";
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  check(chunks >= 3, `the stream came in ${chunks} chunks`);
  check(role === "assistant", "the first delta names the assistant role");
  check(finish === "length", "the stream ends by length");
  check(usage && usage.completion_tokens === 12, "include_usage adds a usage chunk");
  check(text === whole.choices[0].message.content, "the streamed text is the whole completion's (same seed, temperature 0)");
}

async function statefulConversation(client, model) {
  // Extension routes through the client's generic post().
  const created = await client.post("/conversations", { body: {} });
  check(typeof created.id === "string" && created.object === "conversation", `POST /v1/conversations made ${created.id}`);
  const turn = (content, options) =>
    client.chat.completions.create(
      { model, messages: [{ role: "user", content }], max_tokens: 8, temperature: 0, ignore_eos: true,
        ...(options.body ?? {}) },
      { headers: options.headers });
  const first = await turn("My name is Ada.", { body: { conversation: created.id } });
  check(first.usage.prompt_tokens_details?.cached_tokens === 0, "the first turn has nothing cached");
  const second = await turn("What is my name?", { headers: { "X-Conversation-Id": created.id } });
  const cached = second.usage.prompt_tokens_details?.cached_tokens ?? 0;
  check(cached > 0 && second.usage.prompt_tokens > first.usage.prompt_tokens,
        `the second turn (by header) reused ${cached} cached tokens of the history`);
  const history = await client.get(`/conversations/${created.id}`);
  check(history.messages.filter((m) => m.role === "user").length === 2 &&
        history.messages.filter((m) => m.role === "assistant").length === 2,
        "the server kept both turns' messages");
  const other = new OpenAI({ baseURL: client.baseURL, apiKey: KEY, maxRetries: 0 });
  const stream = await other.chat.completions.create(
    { model, messages: [{ role: "user", content: "And now?" }], max_tokens: 4, temperature: 0, ignore_eos: true,
      stream: true, stream_options: { include_usage: true }, conversation: created.id });
  let usage = null;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  check(usage && usage.prompt_tokens_details?.cached_tokens > cached, "a streamed third turn reuses even more");
}

async function wrongKey(baseURL, model) {
  const bad = new OpenAI({ baseURL, apiKey: "sk-wrong", maxRetries: 0 });
  try {
    await bad.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
    check(false, "a wrong key is refused");
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401, "a wrong key throws the client's AuthenticationError (401)");
    check(e.code === "invalid_api_key", "with code invalid_api_key");
  }
}

async function main() {
  const started = startServer(binary, work, ["--api-key", KEY]);
  server = started.child;
  const base = await started.url;
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60_000 });
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].object === "model", `the server lists one model (${models.data[0]?.id})`);
  const model = models.data[0].id;
  await wholeAndStreamed(client, model);
  await statefulConversation(client, model);
  await wrongKey(`${base}/v1`, model);
  const code = await stopServer(server, 20_000);
  server = null;
  check(code === 0, "SIGTERM stops the server with exit code 0");
}

try {
  await main();
  console.log("openai client: all checks passed");
} catch (e) {
  console.error(`openai client: FAILED: ${e.stack ?? e}`);
  if (server) server.kill("SIGKILL");
  process.exit(1);
}
