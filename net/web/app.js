// The Pensieve web chat: one WebSocket to /v1/ws (protocol in net/README.md).
// The open conversation's id lives in location.hash, so a reload resumes it.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  ws: null,
  conversation: null,  // the open conversation's id
  reply: null,         // the assistant element being streamed into
  deltas: 0,
};

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  // A server with API keys: open the page as /?api_key=KEY (a browser's
  // WebSocket cannot send an Authorization header).
  const key = new URLSearchParams(location.search).get("api_key");
  const query = key ? `?api_key=${encodeURIComponent(key)}` : "";
  const ws = new WebSocket(`${scheme}://${location.host}/v1/ws${query}`);
  state.ws = ws;
  setConnection("connecting");
  ws.onopen = () => {
    setConnection("open");
    const id = location.hash.slice(1);
    send(id ? { type: "open", conversation: decodeURIComponent(id) } : { type: "open" });
    send({ type: "list" });
  };
  ws.onmessage = (event) => receive(JSON.parse(event.data));
  ws.onclose = () => {
    setConnection("closed");
    endReply();
    setTimeout(connect, 2000);  // the server restarted, or the network blinked
  };
}

function send(message) {
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(message));
}

function receive(m) {
  switch (m.type) {
    case "opened": return opened(m);
    case "delta": return delta(m.text);
    case "done": return done(m);
    case "conversations": return listConversations(m.items);
    case "deleted":
      if (m.conversation === state.conversation) newConversation();
      return send({ type: "list" });
    case "error": return error(m);
  }
}

function opened(m) {
  state.conversation = m.conversation;
  history.replaceState(null, "", "#" + encodeURIComponent(m.conversation));
  $("model").textContent = m.model;
  $("messages").replaceChildren();
  $("stats").textContent = "";
  for (const item of m.history) addMessage(item.role, item.content);
  markCurrent();
  setBusy(false);
  send({ type: "list" });
}

function delta(text) {
  if (!state.reply) return;
  state.reply.textContent += text;
  state.deltas += 1;
  state.reply.dataset.deltas = String(state.deltas);
  scrollDown();
}

function done(m) {
  const u = m.usage;
  $("stats").textContent =
    `${m.finish_reason} · ${u.completion_tokens} tokens at ${m.tokens_per_s.toFixed(1)} tokens/s` +
    ` · prompt ${u.prompt_tokens} tokens, ${u.cached_tokens} from the cache` +
    (m.ttft_ms !== undefined ? ` · first token after ${m.ttft_ms.toFixed(0)} ms` : "");
  $("stats").dataset.cachedTokens = String(u.cached_tokens);
  if (state.reply) {
    // Under each reply, what its prompt cost: tokens taken from the KV
    // cache, tokens computed, and the time to its first token.
    const meta = document.createElement("div");
    meta.className = "reply-meta";
    const computed = u.prompt_tokens - u.cached_tokens;
    meta.dataset.cachedTokens = String(u.cached_tokens);
    meta.dataset.computedTokens = String(computed);
    if (m.ttft_ms !== undefined) meta.dataset.ttftMs = m.ttft_ms.toFixed(0);
    meta.textContent = `prompt: ${u.cached_tokens} cached, ${computed} computed` +
      (m.ttft_ms !== undefined ? ` · first token ${m.ttft_ms.toFixed(0)} ms` : "");
    state.reply.after(meta);
    state.reply.dataset.finish = m.finish_reason;
  }
  endReply();
}

function error(m) {
  if (m.code === "not_found" && !state.conversation) {
    // The stored id is unknown (the server restarted): start afresh.
    history.replaceState(null, "", location.pathname);
    return send({ type: "open" });
  }
  addMessage("error", `${m.code}: ${m.message}`);
  endReply();
}

function listConversations(items) {
  const list = $("conversations");
  list.replaceChildren();
  items.sort((a, b) => b.created - a.created);
  for (const item of items) {
    const li = document.createElement("li");
    li.dataset.id = item.id;
    const label = document.createElement("span");
    label.textContent = item.id;
    label.title = new Date(item.created * 1000).toLocaleString();
    const remove = document.createElement("button");
    remove.textContent = "×";
    remove.title = "Delete";
    remove.onclick = (event) => {
      event.stopPropagation();
      send({ type: "delete", conversation: item.id });
    };
    li.append(label, remove);
    li.onclick = () => { if (!state.reply) send({ type: "open", conversation: item.id }); };
    list.append(li);
  }
  markCurrent();
}

function markCurrent() {
  for (const li of $("conversations").children) {
    li.classList.toggle("current", li.dataset.id === state.conversation);
  }
}

function newConversation() {
  if (state.reply) return;
  state.conversation = null;
  send({ type: "open" });
}

function submit(event) {
  event.preventDefault();
  const content = $("input").value.trim();
  if (!content || state.reply || !state.conversation) return;
  const message = { type: "send", content };
  const maxTokens = parseInt($("max-tokens").value, 10);
  if (maxTokens > 0) message.max_tokens = maxTokens;
  const temperature = parseFloat($("temperature").value);
  if (temperature >= 0) message.temperature = temperature;
  if ($("ignore-eos").checked) message.ignore_eos = true;
  addMessage("user", content);
  state.reply = addMessage("assistant", "");
  state.reply.classList.add("streaming");
  state.deltas = 0;
  $("input").value = "";
  setBusy(true);
  send(message);
}

function endReply() {
  if (state.reply) state.reply.classList.remove("streaming");
  state.reply = null;
  setBusy(false);
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = `msg ${role}`;
  div.textContent = text;
  $("messages").append(div);
  scrollDown();
  return div;
}

function setBusy(busy) {
  const open = state.ws && state.ws.readyState === WebSocket.OPEN;
  $("send").disabled = busy || !open || !state.conversation;
  $("stop").disabled = !busy;
}

function setConnection(s) {
  $("connection").dataset.state = s;
  $("connection").textContent = s;
  setBusy(!!state.reply);
}

function scrollDown() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

// The sampling settings survive a reload.
for (const id of ["max-tokens", "temperature"]) {
  const saved = localStorage.getItem(`pensieve.${id}`);
  if (saved !== null) $(id).value = saved;
  $(id).addEventListener("change", () => localStorage.setItem(`pensieve.${id}`, $(id).value));
}
$("composer").addEventListener("submit", submit);
$("input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) submit(event);
});
$("stop").addEventListener("click", () => send({ type: "cancel" }));
$("new-conversation").addEventListener("click", newConversation);
connect();
