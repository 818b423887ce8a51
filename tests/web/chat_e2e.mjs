// The web chat page end to end in a real headless Chromium (Debian's),
// driven by playwright-core over the DevTools protocol: starts the real
// `pensieve` server (built-in model, a free port), types a message, sees the
// reply stream in, reloads, sees the conversation resumed, sends again and
// sees the cache used, takes screenshots, then stops the server with SIGTERM
// while the page is still connected and expects a clean exit.
//
// usage: node chat_e2e.mjs PENSIEVE_BINARY WORK_DIR CHROMIUM
import { chromium } from "playwright-core";
import { startServer, stopServer } from "./pensieve_server.mjs";

const [binary, work, chromiumPath] = process.argv.slice(2);
const STEP_MS = 30_000;
const TOTAL_MS = 180_000;
let server = null;
let browser = null;

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

// Sends a message and waits for its reply; returns what was observed.
async function chat(page, text) {
  await page.fill("#input", text);
  // Records the reply's text each time it changes, to see it stream.
  await page.evaluate(() => {
    window.__lengths = [];
    new MutationObserver(() => {
      const replies = document.querySelectorAll(".msg.assistant");
      const last = replies[replies.length - 1];
      if (last) window.__lengths.push(last.textContent.length);
    }).observe(document.getElementById("messages"), { childList: true, subtree: true, characterData: true });
  });
  await page.press("#input", "Enter");
  await lastReplyEnded(page);
  const reply = await page.locator(".msg.assistant").last();
  return {
    text: await reply.textContent(),
    deltas: Number(await reply.getAttribute("data-deltas")),
    finish: await reply.getAttribute("data-finish"),
    lengths: await page.evaluate(() => window.__lengths),
    stats: await page.textContent("#stats"),
    cached: Number(await page.getAttribute("#stats", "data-cached-tokens")),
  };
}

// Waits until the newest reply has its "done".
async function lastReplyEnded(page) {
  await page.waitForFunction(() => {
    const replies = document.querySelectorAll(".msg.assistant");
    return replies.length > 0 && replies[replies.length - 1].dataset.finish !== undefined;
  }, null, { timeout: STEP_MS });
}

async function waitOpened(page) {
  await page.waitForSelector("#connection[data-state=open]", { timeout: STEP_MS });
  await page.waitForSelector("#send:not([disabled])", { timeout: STEP_MS });
  await page.waitForFunction(() => location.hash.length > 1, null, { timeout: STEP_MS });
}

async function main() {
  const started = startServer(binary, work);
  server = started.child;
  const url = await started.url;
  console.log(`server at ${url}`);
  browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    timeout: STEP_MS,
    // playwright gives each launch a fresh temporary --user-data-dir.
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  page.setDefaultTimeout(STEP_MS);
  page.on("console", (m) => console.log(`page: ${m.text()}`));
  page.on("pageerror", (e) => { throw e; });

  await page.goto(`${url}/`);
  await waitOpened(page);
  const id = decodeURIComponent((await page.evaluate(() => location.hash)).slice(1));
  check(id.length > 0, `a conversation is open (${id})`);
  check((await page.textContent("#model")).length > 0, "the model's name is shown");
  await page.fill("#max-tokens", "24");
  await page.fill("#temperature", "0");

  const message = "Hello from headless Chromium";
  const first = await chat(page, message);
  console.log(`reply: ${JSON.stringify(first.text)} (${first.deltas} deltas; ${first.stats})`);
  check(first.text.length > 0, "the reply has text");
  check(first.deltas >= 2, `the reply came in ${first.deltas} deltas`);
  const growing = first.lengths.filter((n) => n > 0);
  check(new Set(growing).size >= 2 && growing.every((n, i) => i === 0 || n >= growing[i - 1]),
        `the page showed the reply growing (${growing.length} updates)`);
  check(/tokens\/s/.test(first.stats) && /from the cache/.test(first.stats), "tokens/s and cache use are shown");
  await page.screenshot({ path: `${work}/web-chat.png` });

  await page.reload();
  await waitOpened(page);
  const resumed = decodeURIComponent((await page.evaluate(() => location.hash)).slice(1));
  check(resumed === id, "the reload resumed the same conversation");
  await page.waitForSelector(".msg.assistant");
  const users = await page.locator(".msg.user").allTextContents();
  const assistants = await page.locator(".msg.assistant").allTextContents();
  check(users.length === 1 && users[0] === message, "the history shows the user's message");
  check(await page.inputValue("#max-tokens") === "24", "the sampling settings survived the reload");
  check(assistants.length === 1 && assistants[0] === first.text, "the history shows the reply, word for word");
  await page.waitForSelector(`#conversations li[data-id="${id}"].current`);
  check(true, "the conversation list marks the open conversation");

  const second = await chat(page, "And then?");
  console.log(`second reply: ${JSON.stringify(second.text)} (${second.stats})`);
  check(second.cached > 0, `the resumed turn took ${second.cached} tokens from the cache`);
  const meta = page.locator(".reply-meta").last();
  const metaCached = Number(await meta.getAttribute("data-cached-tokens"));
  const metaComputed = Number(await meta.getAttribute("data-computed-tokens"));
  const metaText = await meta.textContent();
  console.log(`second reply's caption: ${JSON.stringify(metaText)}`);
  check(metaCached === second.cached && metaComputed > 0 && /cached/.test(metaText) && /computed/.test(metaText),
        `the reply's caption shows its cached (${metaCached}) and computed (${metaComputed}) prompt tokens`);
  check((await meta.getAttribute("data-ttft-ms")) !== null && /first token/.test(metaText),
        "the reply's caption shows its time to first token");
  await page.screenshot({ path: `${work}/web-chat-resumed.png` });

  // The stop button ends a long reply early.
  await page.fill("#max-tokens", "1000");
  await page.check("#ignore-eos");
  await page.fill("#input", "Tell me everything");
  // The built-in model writes 1000 tokens in well under a second, less than
  // a round trip to the page can take on a loaded machine: the page itself
  // looks at the stop button and clicks it at the reply's first delta.
  const stopAtFirstDelta = page.evaluate(() => new Promise((resolve) => {
    const watch = new MutationObserver(() => {
      if (!document.querySelector(".msg.assistant.streaming[data-deltas]")) return;
      watch.disconnect();
      const stop = document.getElementById("stop");
      const enabled = !stop.disabled;
      stop.click();
      resolve(enabled);
    });
    watch.observe(document.getElementById("messages"), { childList: true, subtree: true, attributes: true });
  }));
  await page.press("#input", "Enter");
  const streaming = await stopAtFirstDelta;
  check(streaming, "the stop button is enabled while a reply streams");
  await lastReplyEnded(page);
  const stopped = await page.locator(".msg.assistant").last().getAttribute("data-finish");
  check(stopped === "cancelled", `the stop button cancelled the reply (finish: ${stopped})`);
  check(/cancelled/.test(await page.textContent("#stats")), "the stats line says the reply was cancelled");
  check(await page.isEnabled("#send"), "the page takes the next message");

  // The server stops while the page is still connected.
  const code = await stopServer(server, 15_000);
  check(code === 0, `the server exited cleanly on SIGTERM with a page connected (code ${code})`);
  await page.waitForSelector("#connection[data-state=closed]");
  check(true, "the page saw the connection close");
}

const watchdog = setTimeout(() => {
  console.error(`FAIL: the test did not finish within ${TOTAL_MS / 1000} s`);
  if (server) server.kill("SIGKILL");
  process.exit(1);
}, TOTAL_MS);

// Killed from outside (ctest's timeout): take the server down too.
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    if (server) server.kill("SIGKILL");
    process.exit(1);
  });
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  console.error(`FAIL: ${e.stack || e}`);
} finally {
  if (browser) await browser.close().catch(() => {});
  if (server) await stopServer(server, 5_000);
  clearTimeout(watchdog);
}
console.log(failed ? "web e2e: FAILED" : "web e2e: passed");
process.exit(failed ? 1 : 0);
