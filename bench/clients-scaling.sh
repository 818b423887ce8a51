#!/usr/bin/env bash
# W-clients of ../shared/BENCH.md: how one server scales with its clients.
# A fresh pensieve server per client count (the conversation API),
# W-synthetic conversations (bench/w_synthetic.py), pensieve-bench --stateful
# with 1, 4, 8 and 16 conversations in flight, one after another; prints output tok/s and TTFT p50/p99 per client count and
# their ratios to one client (targets of issue 24: 8 clients >= 4x the
# output tok/s of one, p50 TTFT at 8 <= 2.5x its one-client value).
#
# Usage: bench/clients-scaling.sh OUT_DIR [BUILD_DIR]
#   env: CLIENTS (1,4,8,16) CONVERSATIONS (16) TURNS (6) MAX_TOKENS (32) THREADS (2)
#        WORK (/tmp/pensieve-clients) MODEL (a GGUF instead of BENCH.md's M-100)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
build=$(cd "${2:-$root/build/release}" && pwd)
clients=${CLIENTS:-1,4,8,16} conversations=${CONVERSATIONS:-16} turns=${TURNS:-6}
max_tokens=${MAX_TOKENS:-32} threads=${THREADS:-2}
work=${WORK:-/tmp/pensieve-clients}
mkdir -p "$work"
bench_name=clients-scaling
pids=()
# shellcheck source=bench/serving-common.sh
source "$here/serving-common.sh"
trap stop_servers EXIT
model=${MODEL:-$work/M-100-F16.gguf}
ensure_m100 "$model"
data=$work/w-synthetic-${conversations}x${turns}.jsonl
w_synthetic "$data" "$conversations" "$turns" "$max_tokens"

# A fresh server per client count: a later count would otherwise find the
# earlier one's conversations (the same dataset) in the prefix index.
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
start_time=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for c in ${clients//,/ }; do
  start_server "$model" "$c" url
  thread_cpu "${pids[-1]}" "$out/clients-$c-threads-before.txt"
  "$build/bench/pensieve-bench" --target "conversation-api=$url" --stateful --data "$data" \
    --conversations "$conversations" --concurrency "$c" --max-tokens "$max_tokens" --out "$out/clients-$c" |
    tee "$out/clients-$c.txt"
  thread_cpu "${pids[-1]}" "$out/clients-$c-threads-after.txt"
  stop_servers
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$out" "$clients" "$start_time" "$load_start" "$load_end" "$*" <<'PY'
import json, os, subprocess, sys
out, clients, when, load_start, load_end, args = sys.argv[1:7]
def role(name):
    for prefix, r in (("pv-compute", "compute"), ("pv-stream", "compute"), ("pv-worker", "control"),
                      ("pv-http", "http"),
                      ("pv-control", "control"), ("pv-rpc", "rpc")):
        if name.startswith(prefix):
            return r
    return "other"

def role_ticks(path):
    ticks = {}
    for line in open(path):
        name, t = line.rsplit(" ", 1)
        ticks[role(name)] = ticks.get(role(name), 0) + int(t)
    return ticks

rows = {}
for c in clients.split(","):
    doc = json.load(open(os.path.join(out, f"clients-{c}", f"conversation-api-concurrency{c}.json")))
    rows[int(c)] = {"output_tokens_per_s": doc["throughput"]["output_tokens_per_s"],
                    "ttft_p50_s": doc["ttft"]["p50_ms"] / 1000.0, "ttft_p99_s": doc["ttft"]["p99_ms"] / 1000.0,
                    "errors": doc["requests"]["errors"]}
    # Each role's CPU seconds over the run (the server's threads, by name).
    before = role_ticks(os.path.join(out, f"clients-{c}-threads-before.txt"))
    after = role_ticks(os.path.join(out, f"clients-{c}-threads-after.txt"))
    hz = os.sysconf("SC_CLK_TCK")
    cpu_s = {r: (after.get(r, 0) - before.get(r, 0)) / hz for r in after}
    rows[int(c)]["cpu_seconds"] = cpu_s
    total = sum(cpu_s.values())
    rows[int(c)]["http_share_of_cpu"] = cpu_s.get("http", 0) / total if total else 0.0
    rows[int(c)]["http_over_compute"] = cpu_s.get("http", 0) / cpu_s["compute"] if cpu_s.get("compute") else 0.0
one = rows[min(rows)]
for r in rows.values():
    r["throughput_over_one_client"] = r["output_tokens_per_s"] / one["output_tokens_per_s"]
    r["ttft_p50_over_one_client"] = r["ttft_p50_s"] / one["ttft_p50_s"]
cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
commit = subprocess.run(["git", "-C", os.path.dirname(out), "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip() or "unknown"
json.dump({"date_utc": when, "commit": commit, "cpu": cpu, "cores": os.cpu_count(),
           "command": "bench/clients-scaling.sh " + args, "load_average_start": load_start,
           "load_average_end": load_end, "clients": {str(k): v for k, v in rows.items()}},
          open(os.path.join(out, "summary.json"), "w"), indent=1)
print(f"{'clients':>7} {'out tok/s':>10} {'x one':>6} {'TTFT p50':>9} {'x one':>6} {'TTFT p99':>9} {'errors':>6} "
      f"{'CPU s: compute':>14} {'control':>7} {'http':>6} {'other':>6} {'http/compute':>12}")
for c, r in sorted(rows.items()):
    s = r["cpu_seconds"]
    print(f"{c:7d} {r['output_tokens_per_s']:10.2f} {r['throughput_over_one_client']:6.2f} {r['ttft_p50_s']:8.3f}s "
          f"{r['ttft_p50_over_one_client']:6.2f} {r['ttft_p99_s']:8.3f}s {r['errors']:6d} "
          f"{s.get('compute', 0):14.2f} {s.get('control', 0):7.2f} {s.get('http', 0):6.2f} {s.get('other', 0):6.2f} "
          f"{r['http_over_compute']:12.3f}")
PY
