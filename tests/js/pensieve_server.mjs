// Starting and stopping the real `pensieve` binary from the Node.js tests
// (tests/openai-node, tests/web): their run scripts copy this file next to
// theirs. The server takes free loopback ports and a cache in WORK/cache;
// its stderr is echoed.
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";

// Starts pensieve with `args` (after --port 0 --rpc-port 0 --threads 1
// --kv-device-mb 64). Returns { child, url }: the process at once (so a
// caller can kill it whatever happens) and a promise of its base URL.
export function startServer(binary, work, args = []) {
  mkdirSync(`${work}/cache`, { recursive: true });
  const child = spawn(binary, ["--port", "0", "--rpc-port", "0", "--threads", "1", "--kv-device-mb", "64", ...args], {
    env: { ...process.env, XDG_CACHE_HOME: `${work}/cache` },
    stdio: ["ignore", "inherit", "pipe"],
  });
  const url = new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error("the server did not start")), 120_000);
    child.on("exit", (code) => reject(new Error(`the server exited early (${code}): ${seen}`)));
    child.on("error", (e) => reject(new Error(`cannot start ${binary}: ${e.message}`)));
    child.stderr.on("data", (chunk) => {
      process.stderr.write(chunk);
      seen += chunk.toString();
      const m = seen.match(/serving .* on (http:\/\/[\d.]+:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  return { child, url };
}

// SIGTERM; resolves to the exit code, or null when it had to be killed.
export function stopServer(child, graceMs) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    const kill = setTimeout(() => { child.kill("SIGKILL"); resolve(null); }, graceMs);
    child.removeAllListeners("exit");
    child.on("exit", (code) => { clearTimeout(kill); resolve(code); });
    child.kill("SIGTERM");
  });
}
