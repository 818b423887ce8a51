#!/usr/bin/env bash
# Tracing overhead (issue 10): serving throughput of `pensieve` with its
# Tracer recording (--trace FILE) against the same binary without, side by
# side: two servers on the same model, loaded one at a time, in alternating
# rounds (off, on, on, off, ...) so drift on a shared machine hits both
# alike. Each run is pensieve-bench's closed loop on the same workload and
# seed. Writes the per-run figures, medians and the median of the per-round
# ratios (on / off) to OUT.json.
#
# Usage: bench/trace-overhead.sh PENSIEVE PENSIEVE_BENCH DATA.jsonl OUT.json [ROUNDS] [CONVERSATIONS]
set -euo pipefail
pensieve=$(realpath "$1"); bench=$(realpath "$2"); data=$(realpath "$3"); out=$4
rounds=${5:-6}; conversations=${6:-8}
work=$(mktemp -d /tmp/trace-overhead.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start() {  # label, extra flags...; sets url to the server's base URL
  local label=$1; shift
  "$pensieve" --port 0 --rpc-port 0 --threads 1 --kv-device-mb 256 "$@" >/dev/null 2>"$work/$label.log" &
  pids+=($!)
  url=""
  for _ in $(seq 600); do
    url=$(grep -so "http://127.0.0.1:[0-9]*" "$work/$label.log" | head -1 || true)
    [[ -n $url ]] && return
    sleep 0.1
  done
  echo "trace-overhead: $label did not start" >&2; exit 1
}

export XDG_CACHE_HOME=$work/cache
start off; off_url=$url
start on --trace "$work/on.ptrace"; on_url=$url
bench_args=(--data "$data" --conversations "$conversations" --concurrency 4 --think-time-s 0
            --max-tokens 64 --stateful --seed 1)
for r in $(seq "$rounds"); do
  order=(off on); (( r % 2 == 0 )) && order=(on off)
  for label in "${order[@]}"; do
    url=$off_url; [[ $label == on ]] && url=$on_url
    "$bench" --target "$label=$url" "${bench_args[@]}" --out "$work/round$r" >/dev/null
  done
done
for p in "${pids[@]}"; do kill -TERM "$p"; done
wait 2>/dev/null || true
pids=()
python3 - "$work" "$rounds" "$out" "$pensieve" "$bench" "$data" "$conversations" <<'PY'
import glob, json, os, statistics, sys, time
work, rounds, out, pensieve, bench, data, conversations = sys.argv[1:]
rounds = int(rounds)
runs = {"off": [], "on": []}
for r in range(1, rounds + 1):
    for label in ("off", "on"):
        [f] = glob.glob(f"{work}/round{r}/{label}-concurrency4.json")
        d = json.load(open(f))
        runs[label].append({"round": r, "output_tokens_per_s": d["throughput"]["output_tokens_per_s"],
                            "requests_per_s": d["throughput"]["requests_per_s"],
                            "ttft_p50_ms": d["ttft"].get("p50_ms"), "errors": d["errors"]["count"] if isinstance(d["errors"], dict) else d["errors"]})
ratios = [on["output_tokens_per_s"] / off["output_tokens_per_s"] for on, off in zip(runs["on"], runs["off"])]
trace_log = open(f"{work}/on.log").read().strip().splitlines()
result = {
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "what": "pensieve serving throughput with the Tracer recording (--trace FILE) vs without, same binary, "
            "alternating rounds on one machine",
    "command": f"bench/trace-overhead.sh {pensieve} {bench} {data} OUT.json {rounds} {conversations}",
    "bench_command": f"{bench} --target LABEL=URL --data {data} --conversations {conversations} --concurrency 4 "
                     "--think-time-s 0 --max-tokens 64 --stateful --seed 1 --out DIR",
    "servers": f"{pensieve} --port 0 --rpc-port 0 --threads 1 --kv-device-mb 256 [--trace FILE] (built-in generated model)",
    "machine": {"nproc": os.cpu_count(), "loadavg_at_end": os.getloadavg()},
    "runs": runs,
    "median_output_tokens_per_s": {k: statistics.median(x["output_tokens_per_s"] for x in v) for k, v in runs.items()},
    "ratios_on_over_off": ratios,
    "median_ratio_on_over_off": statistics.median(ratios),
    "traced_server_exit": [l for l in trace_log if "trace spans" in l],
}
result["loss_percent"] = round((1 - result["median_ratio_on_over_off"]) * 100, 2)
json.dump(result, open(out, "w"), indent=2)
print(json.dumps({k: result[k] for k in ("median_output_tokens_per_s", "ratios_on_over_off", "median_ratio_on_over_off", "loss_percent")}, indent=1))
PY
