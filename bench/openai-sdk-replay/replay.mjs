// A multi-turn replay through the official `openai` npm package, as an
// ordinary OpenAI client runs one: every turn resends the whole history
// (with the replies as the server streamed them), no conversation id. The
// workload is pensieve-bench's (bench/pensieve-bench/workload.cpp): the first
// N conversations of a JSONL file in order, one request per user message,
// max_tokens = ceil(chars/4) of the dataset's reply capped at --max-tokens,
// greedy with ignore_eos, a closed loop of --concurrency conversations and
// no think time. Writes a JSON summary: output tok/s, TTFT percentiles,
// prompt tokens sent and reported cached (usage.prompt_tokens_details).
//
// usage: node replay.mjs --url http://127.0.0.1:PORT --data FILE.jsonl
//          [--conversations N] [--concurrency C] [--max-tokens N] [--model NAME] --out FILE.json
import OpenAI from "openai";
import { readFileSync, writeFileSync } from "node:fs";

function parseArgs(argv) {
  const a = { conversations: 0, concurrency: 4, maxTokens: 128, model: null };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--url") a.url = value;
    else if (flag === "--data") a.data = value;
    else if (flag === "--conversations") a.conversations = Number.parseInt(value, 10);
    else if (flag === "--concurrency") a.concurrency = Number.parseInt(value, 10);
    else if (flag === "--max-tokens") a.maxTokens = Number.parseInt(value, 10);
    else if (flag === "--model") a.model = value;
    else if (flag === "--out") a.out = value;
    else throw new Error(`unknown flag ${flag}`);
  }
  for (const need of ["url", "data", "out"]) if (!a[need]) throw new Error(`--${need} is required`);
  if (!(a.concurrency >= 1) || !(a.maxTokens >= 1) || !(a.conversations >= 0)) throw new Error("bad number");
  return a;
}

// One request per user message; system messages ride with the next one.
function planTurns(conversation, cap) {
  const turns = [];
  let pending = [];
  const t = conversation.turns;
  for (let i = 0; i < t.length; ++i) {
    if (t[i].role === "assistant") continue;
    pending.push({ role: t[i].role, content: t[i].content });
    if (t[i].role !== "user") continue;
    const reply = i + 1 < t.length && t[i + 1].role === "assistant" ? t[i + 1].content : null;
    const chars = reply === null ? 0 : [...reply].length;
    const maxTokens = reply === null ? cap : Math.min(Math.max(Math.ceil(chars / 4), 1), cap);
    turns.push({ newMessages: pending, maxTokens });
    pending = [];
  }
  return turns;
}

function percentile(sorted, q) {
  if (sorted.length === 0) return null;
  const rank = q * (sorted.length - 1);
  const lo = Math.floor(rank), hi = Math.ceil(rank);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

async function runTurn(client, model, history, turn, record) {
  const started = performance.now();
  let first = null, text = "", usage = null;
  const stream = await client.chat.completions.create({
    model, messages: history, max_tokens: turn.maxTokens, temperature: 0, stream: true,
    stream_options: { include_usage: true }, ignore_eos: true,
  });
  for await (const chunk of stream) {
    const delta = chunk.choices?.[0]?.delta?.content;
    if (delta) {
      if (first === null) first = performance.now();
      text += delta;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  const ended = performance.now();
  if (!usage) throw new Error("the stream carried no usage");
  record.push({
    ttft_s: ((first ?? ended) - started) / 1000, e2e_s: (ended - started) / 1000,
    prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens,
    cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
  });
  return text;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const lines = readFileSync(a.data, "utf8").split("\n").filter((l) => l.trim() !== "");
  const dataset = lines.map((l) => JSON.parse(l));
  const n = a.conversations || dataset.length;
  const plans = Array.from({ length: n }, (_, i) => planTurns(dataset[i % dataset.length], a.maxTokens));
  const client = new OpenAI({ baseURL: `${a.url}/v1`, apiKey: "none", maxRetries: 0, timeout: 600_000 });
  const model = a.model ?? (await client.models.list()).data[0].id;
  const records = [];
  let next = 0, failed = 0, firstError = null;
  const t0 = performance.now();
  async function worker() {
    while (next < plans.length) {
      const turns = plans[next++];
      const history = [];
      try {
        for (const turn of turns) {
          history.push(...turn.newMessages);
          const reply = await runTurn(client, model, history, turn, records);
          history.push({ role: "assistant", content: reply });
        }
      } catch (e) {
        ++failed;
        firstError ??= String(e?.message ?? e);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(a.concurrency, plans.length) }, worker));
  const makespan = (performance.now() - t0) / 1000;
  const ttft = records.map((r) => r.ttft_s).sort((x, y) => x - y);
  const sum = (k) => records.reduce((s, r) => s + r[k], 0);
  const summary = {
    client: "openai npm package, stateless (whole history every turn)",
    command: `node ${process.argv.slice(1).join(" ")}`,
    url: a.url, model, data: a.data, conversations: n, concurrency: a.concurrency, max_tokens_cap: a.maxTokens,
    requests: records.length, failed_conversations: failed, first_error: firstError,
    makespan_s: makespan, output_tokens: sum("completion_tokens"),
    output_tokens_per_s: sum("completion_tokens") / makespan,
    prompt_tokens_sent: sum("prompt_tokens"), cached_tokens_reported: sum("cached_tokens"),
    ttft_p50_s: percentile(ttft, 0.5), ttft_p99_s: percentile(ttft, 0.99), requests_detail: records,
  };
  writeFileSync(a.out, JSON.stringify(summary, null, 1));
  console.log(`openai-sdk-replay: ${records.length} requests, ${summary.output_tokens_per_s.toFixed(2)} output tok/s, ` +
              `TTFT p50 ${summary.ttft_p50_s?.toFixed(3)} s, cached ${summary.cached_tokens_reported} of ` +
              `${summary.prompt_tokens_sent} prompt tokens, ${failed} failed`);
  if (failed > 0) process.exit(1);
}

main().catch((e) => { console.error(`openai-sdk-replay: ${e.message}`); process.exit(2); });
