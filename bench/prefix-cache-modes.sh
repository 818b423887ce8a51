#!/usr/bin/env bash
# The four client modes of ../shared/BENCH.md in one run, each against its own
# fresh pensieve server (same model and flags), one after another on the
# same W-synthetic conversations:
#   conversation-api  pensieve-bench --stateful: only the new message, "conversation": ID
#   openai-client     pensieve-bench --stateless: the whole history resent, no id (the
#                     prefix cache must find it)
#   openai-sdk        the official `openai` npm package, stateless
#                     (bench/openai-sdk-replay/replay.mjs)
#   no-state          pensieve --no-state, stateless client (nothing reused)
# W-synthetic: CONVERSATIONS x TURNS, 60-word user messages from a fixed word
# list, MAX_TOKENS output tokens (ignore_eos), IN_FLIGHT conversations in
# flight, no think time. The model is BENCH.md's M-100 (F16, seed 7, Llama
# vocabulary), made once under WORK. REPS repetitions, each on fresh servers;
# OUT/rep-N holds each one's files, OUT/summary.json the medians over them
# and the ratios the issue asks for, also printed as a table.
#
# Usage: bench/prefix-cache-modes.sh OUT_DIR [BUILD_DIR]
#   env: CONVERSATIONS (16) TURNS (6) IN_FLIGHT (8) MAX_TOKENS (32) THREADS (2) REPS (3)
#        WORK (/tmp/pensieve-prefix-modes) MODEL (a GGUF instead of M-100)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
build=$(cd "${2:-$root/build/release}" && pwd)
conversations=${CONVERSATIONS:-16} turns=${TURNS:-6} in_flight=${IN_FLIGHT:-8}
max_tokens=${MAX_TOKENS:-32} threads=${THREADS:-2} reps=${REPS:-3}
work=${WORK:-/tmp/pensieve-prefix-modes}
mkdir -p "$work"
bench_name=prefix-cache-modes
pids=()
# shellcheck source=bench/serving-common.sh
source "$here/serving-common.sh"
trap stop_servers EXIT
model=${MODEL:-$work/M-100-F16.gguf}
ensure_m100 "$model"
data=$work/w-synthetic-${conversations}x${turns}.jsonl
w_synthetic "$data" "$conversations" "$turns" "$max_tokens"

sdk_dir=$work/openai-sdk
mkdir -p "$sdk_dir"
cp "$root/tests/openai-node/package.json" "$root/tests/openai-node/package-lock.json" "$here/openai-sdk-replay/replay.mjs" \
  "$sdk_dir/"
if ! cmp -s "$sdk_dir/package-lock.json" "$sdk_dir/node_modules/.installed-lock" 2>/dev/null; then
  (cd "$sdk_dir" && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.installed-lock)
fi

# One repetition into OUT/rep-N: four fresh servers (nothing cached from an
# earlier repetition); the SDK runs after the others in odd repetitions and
# before them in even ones, so drift does not favour one side.
run_http() {
  "$build/bench/pensieve-bench" --target "stateful:conversation-api=$conv_url" \
    --target "stateless:openai-client=$openai_url" --target "stateless:no-state=$no_state_url" \
    --data "$data" --conversations "$conversations" --concurrency "$in_flight" --max-tokens "$max_tokens" \
    --out "$rep_dir" | tee "$rep_dir/pensieve-bench.txt"
}
run_sdk() {
  node "$sdk_dir/replay.mjs" --url "$sdk_url" --data "$data" --conversations "$conversations" \
    --concurrency "$in_flight" --max-tokens "$max_tokens" --out "$rep_dir/openai-sdk.json"
}
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
start_time=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for ((rep = 1; rep <= reps; rep++)); do
  rep_dir=$out/rep-$rep
  mkdir -p "$rep_dir"
  start_server "$model" "conversation-api-$rep" conv_url
  start_server "$model" "openai-client-$rep" openai_url
  start_server "$model" "no-state-$rep" no_state_url --no-state
  start_server "$model" "openai-sdk-$rep" sdk_url
  if ((rep % 2)); then run_http; run_sdk; else run_sdk; run_http; fi
  stop_servers
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$out" "$data" "$start_time" "$load_start" "$load_end" "$reps" "$*" <<'PY'
import glob, json, os, statistics, subprocess, sys
out, data, when, load_start, load_end, reps, args = sys.argv[1:8]
def http_row(path):
    doc = json.load(open(path))
    return {"output_tokens_per_s": doc["throughput"]["output_tokens_per_s"], "ttft_p50_s": doc["ttft"]["p50_ms"] / 1000.0,
            "ttft_p99_s": doc["ttft"]["p99_ms"] / 1000.0, "prompt_tokens_sent": doc["tokens"]["prompt"],
            "cached_tokens_reported": doc["tokens"]["cached"], "failed": doc["requests"]["errors"]}
def sdk_row(path):
    sdk = json.load(open(path))
    row = {k: sdk[k] for k in ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "prompt_tokens_sent",
                               "cached_tokens_reported")}
    row["failed"] = sdk["failed_conversations"]
    return row
per_rep = []
for r in range(1, int(reps) + 1):
    d = os.path.join(out, f"rep-{r}")
    rows = {name: http_row(glob.glob(os.path.join(d, name + "-concurrency*.json"))[0])
            for name in ("conversation-api", "openai-client", "no-state")}
    rows["openai-sdk"] = sdk_row(os.path.join(d, "openai-sdk.json"))
    per_rep.append(rows)
modes = {}
for name in per_rep[0]:
    runs = [rows[name] for rows in per_rep]
    modes[name] = {k: statistics.median(r[k] for r in runs) for k in ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s")}
    modes[name]["output_tokens_per_s_each"] = [r["output_tokens_per_s"] for r in runs]
    for k in ("prompt_tokens_sent", "cached_tokens_reported", "failed"):
        modes[name][k] = sum(r[k] for r in runs)
def ratio(a, b, key):
    """The median over the repetitions of a / b within each: the modes of one
    repetition ran minutes apart, the repetitions farther (the load drifts)."""
    each = [rows[a][key] / rows[b][key] for rows in per_rep if rows[b][key]]
    return statistics.median(each) if each else None
cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
commit = subprocess.run(["git", "-C", os.path.dirname(out), "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip() or "unknown"
summary = {"date_utc": when, "commit": commit, "cpu": cpu, "cores": os.cpu_count(), "data": data,
           "command": "bench/prefix-cache-modes.sh " + args, "repetitions": int(reps),
           "load_average_start": load_start, "load_average_end": load_end,
           "note": "per mode: medians over the repetitions, token counts summed over them; ratios: the median of "
                   "the ratios within each repetition", "modes": modes,
           "openai_client_over_conversation_api_throughput": ratio("openai-client", "conversation-api", "output_tokens_per_s"),
           "openai_sdk_over_conversation_api_throughput": ratio("openai-sdk", "conversation-api", "output_tokens_per_s"),
           "openai_client_ttft_p50_over_conversation_api": ratio("openai-client", "conversation-api", "ttft_p50_s"),
           "openai_sdk_ttft_p50_over_conversation_api": ratio("openai-sdk", "conversation-api", "ttft_p50_s"),
           "openai_client_over_no_state_throughput": ratio("openai-client", "no-state", "output_tokens_per_s"),
           "openai_sdk_over_no_state_throughput": ratio("openai-sdk", "no-state", "output_tokens_per_s"),
           "conversation_api_over_no_state_throughput": ratio("conversation-api", "no-state", "output_tokens_per_s")}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(f"medians of {reps} repetitions; cached / sent summed over them; ratios: medians of each repetition's")
print(f"{'mode':18} {'out tok/s':>10} {'TTFT p50':>9} {'TTFT p99':>9} {'cached / sent':>22} {'failed':>6}")
for name, r in modes.items():
    hit = f"{r['cached_tokens_reported']} / {r['prompt_tokens_sent']}"
    print(f"{name:18} {r['output_tokens_per_s']:10.2f} {r['ttft_p50_s']:8.3f}s {r['ttft_p99_s']:8.3f}s {hit:>22} {r['failed']:>6}")
for k, v in summary.items():
    if k.endswith("throughput") or "ttft_p50_over" in k:
        print(f"{k}: {v:.3f}" if v is not None else f"{k}: n/a")
PY
