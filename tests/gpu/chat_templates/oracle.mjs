// Renders every template in templates/ over every conversation in
// conversations.json with @huggingface/jinja (the reference transformers.js
// uses) and with Pensieve's interpreter (pensieve-model render-template
// --batch), and fails unless the two agree byte for byte. Where the reference
// raises (a template refusing a conversation: roles that do not alternate, a
// role it does not know) Pensieve must fail too.
//   usage: node oracle.mjs PENSIEVE_MODEL_BINARY HERE_DIR WORK_DIR
import { Template } from "@huggingface/jinja";
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [binary, here, work] = process.argv.slice(2);

// strftime_now reads the clock (Granite, Llama 3.2 write "Today Date"): both
// renderers see 2024-07-26 10:30 (run with TZ=UTC).
const now = [2024, 7, 26, 10, 30];
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    super(...(args.length > 0 ? args : [RealDate.UTC(now[0], now[1] - 1, now[2], now[3], now[4])]));
  }
};
const data = JSON.parse(readFileSync(join(here, "conversations.json"), "utf8"));
const dir = join(here, "templates");
const names = readdirSync(dir).filter((n) => n.endsWith(".jinja")).sort();

const cases = [];
for (const name of names) {
  for (const conv of data.conversations) {
    const context = {
      messages: conv.messages,
      add_generation_prompt: conv.add_generation_prompt,
      bos_token: "<s>",
      eos_token: "</s>",
      date_string: "26 Jul 2024",
    };
    // The tool_use variants are the templates a model uses when given tools.
    if (conv.tools || name.includes("tool_use")) context.tools = data.tools;
    if ("enable_thinking" in conv) context.enable_thinking = conv.enable_thinking;
    cases.push({ name, conversation: conv.name, template: join(dir, name), context });
  }
}

const expected = cases.map((c) => {
  try {
    return { text: new Template(readFileSync(c.template, "utf8")).render(structuredClone(c.context)) };
  } catch (e) {
    return { error: String(e && e.message) };
  }
});

const casesPath = join(work, "cases.json");
writeFileSync(casesPath, JSON.stringify({ now, cases: cases.map(({ template, context }) => ({ template, context })) }));
const actual = JSON.parse(
  execFileSync(binary, ["render-template", "--batch", casesPath], { maxBuffer: 256 << 20, encoding: "utf8" }),
);

let failures = 0;
const rendered = new Map(names.map((n) => [n, 0]));
cases.forEach((c, i) => {
  const want = expected[i];
  const got = actual[i];
  const label = `${c.name} / ${c.conversation}`;
  if (want.error !== undefined) {
    if (got.error === undefined) {
      failures++;
      console.log(`MISMATCH ${label}: the reference fails (${want.error}) but Pensieve rendered`);
    }
    return;
  }
  if (got.error !== undefined) {
    failures++;
    console.log(`MISMATCH ${label}: Pensieve failed: ${got.error}`);
    return;
  }
  if (got.text !== want.text) {
    failures++;
    let at = 0;
    while (at < want.text.length && want.text[at] === got.text[at]) at++;
    console.log(`MISMATCH ${label} at char ${at}:\n  want ${JSON.stringify(want.text.slice(Math.max(0, at - 40), at + 60))}\n  got  ${JSON.stringify(got.text.slice(Math.max(0, at - 40), at + 60))}`);
    return;
  }
  rendered.set(c.name, rendered.get(c.name) + 1);
});

// A template the reference cannot render at all would compare nothing.
for (const [name, n] of rendered) {
  if (n === 0) {
    failures++;
    console.log(`EMPTY ${name}: no conversation rendered, nothing was compared`);
  }
}
const same = [...rendered.values()].reduce((a, b) => a + b, 0);
console.log(`${names.length} templates x ${data.conversations.length} conversations: ${same} identical renders, ` +
  `${cases.length - same - failures} refused by both, ${failures} failures`);
process.exit(failures === 0 ? 0 : 1);
