# Sourced by the serving benchmarks (bench/prefix-cache-modes.sh,
# bench/clients-scaling.sh): BENCH.md's M-100 model, W-synthetic's dataset
# and pensieve servers on free loopback ports. Expects `build` (a build
# folder), `work` (a scratch folder), `threads` and `pids` (an array) set by
# the caller; `bench_name` names the caller in its messages.

# ensure_m100 PATH: makes BENCH.md's M-100 (F16, seed 7, untied, Llama
# vocabulary) at PATH unless it is there.
ensure_m100() {
  local model=$1 vocab
  vocab="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/vocab/ggml-vocab-llama-spm.gguf"
  [[ -f $model ]] && return 0
  [[ -f $vocab ]] || { echo "$bench_name: $vocab is absent (../shared)" >&2; return 1; }
  "$build/tools/pensieve-model" make-test-model --out "$model" --layers 12 --dim 768 --heads 12 --kv-heads 4 \
    --ff 2048 --dtype f16 --seed 7 --untied --vocab-from "$vocab" >/dev/null
}

# w_synthetic PATH CONVERSATIONS TURNS MAX_TOKENS: W-synthetic as a dataset.
w_synthetic() { python3 "$(dirname "${BASH_SOURCE[0]}")/w_synthetic.py" "$@"; }

# start_server MODEL NAME VAR [FLAGS...]: starts pensieve on MODEL (its log
# in work/server-NAME.log, its pid appended to `pids`) and sets VAR to its
# base URL once it serves.
start_server() {
  local model=$1 log=$work/server-$2.log var=$3 found
  shift 3
  "$build/tools/pensieve" --model "$model" --port 0 --rpc-port 0 --threads "$threads" --kv-device-mb 1024 "$@" \
    >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do
    if found=$(grep -oE 'serving .* on http://[0-9.]+:[0-9]+' "$log" | grep -oE 'http://[0-9.]+:[0-9]+'); then
      printf -v "$var" '%s' "$found"
      return 0
    fi
    sleep 0.2
  done
  echo "$bench_name: the server did not start: $(tail -n 5 "$log")" >&2
  return 1
}

# thread_cpu PID OUT: the CPU time (user + system, clock ticks) of each of
# PID's threads by name, one "NAME TICKS" line each, into OUT: the server
# names its threads by role (pv-stream and pv-compute-N: the forward pass on
# the CPU backend; pv-worker, pv-control: the actors; pv-http-N; pv-rpc;
# runtime/thread_name.hpp), so two of these around a run give each
# role's share of the CPU.
thread_cpu() {
  local pid=$1 out=$2 t stat rest
  local -a f
  : >"$out"
  for t in /proc/"$pid"/task/*; do
    stat=$(cat "$t/stat" 2>/dev/null) || continue
    rest=${stat##*) }  # the fields after the name, which may hold spaces
    read -r -a f <<<"$rest"
    # fields 14 and 15 of stat (utime, stime) are 12 and 13 of rest (from 1)
    echo "$(cat "$t/comm" 2>/dev/null) $((f[11] + f[12]))" >>"$out"
  done
}

# stop_servers: every server start_server started, stopped and waited for.
stop_servers() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
