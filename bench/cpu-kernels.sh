#!/usr/bin/env bash
# The CPU kernel figures of bench/README.md ("K-quant mixes", a table per CPU) in one
# command: makes the M-100 F16 file and its llama-quantize Q4_K_M / Q5_K_M / Q6_K / IQ4_XS mixes
# (seed 7, untied output head) once, then runs model-bench over F16, Q8_0 and the four
# mixes (decode batches 1 and 8, the mixed shapes) and the one-thread small-batch matmul
# micro-benchmark. Run it on a quiet machine; it names the CPU and the load in its output.
# The last mixed shape, one 512-token chunk after 320 cached tokens, has about the query-key
# pairs of 4 + 4 x 127 @ 512 (512 x 576 against 4 x 127 x 576 + 4 x 512): the single-sequence
# prefill with the same attention work.
#
#   bench/cpu-kernels.sh LLAMA_QUANTIZE OUT_PREFIX [COMMIT]
#
# LLAMA_QUANTIZE: a llama.cpp llama-quantize binary (built outside the project).
# OUT_PREFIX: e.g. bench/results/2026-12-02-amd-zen5-kernels (writes -model.json,
# -model.txt, -micro.json and -decode.json). Model files go to $KQ_DIR (default /tmp/kq-bench).
set -euo pipefail
quantize=${1:?llama-quantize binary}
out=${2:?output prefix}
commit=${3:-$(git rev-parse --short HEAD)}
build=${BUILD_DIR:-build/release}
dir=${KQ_DIR:-/tmp/kq-bench}
vocab=../shared/vocab/ggml-vocab-llama-spm.gguf
mkdir -p "$dir"
f16="$dir/M-100-F16-untied.gguf"
if [[ ! -f "$f16" ]]; then
  "$build/tools/pensieve-model" make-test-model --out "$f16" --layers 12 --dim 768 --heads 12 \
    --kv-heads 4 --ff 2048 --dtype f16 --seed 7 --untied --vocab-from "$vocab"
fi
for q in Q4_K_M Q5_K_M Q6_K IQ4_XS; do
  [[ -f "$dir/M-100-$q.gguf" ]] || "$quantize" "$f16" "$dir/M-100-$q.gguf" "$q" 1 > "$dir/quantize-$q.log" 2>&1
done
# The benchmarks run from fresh copies of their binaries: on the AMD Zen 5 VM a binary file
# that had run many times sometimes ran a kernel 2-3.5x slower than a byte-identical copy
# (results/2026-12-06-amd-zen5-vnni-broadcast.md).
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cp "$build/bench/model-bench" "$build/bench/pensieve-microbench" "$bin/"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/tools/pensieve-model" inspect --cpu | grep '^cpu: tuning'
"$bin/model-bench" --threads 2 --models M-100 --dtypes f16,q8_0 --vocab-from "$vocab" \
  --model-dir "$dir" --reuse-models \
  --gguf "M-100:Q4_K_M:$dir/M-100-Q4_K_M.gguf" --gguf "M-100:Q5_K_M:$dir/M-100-Q5_K_M.gguf" \
  --gguf "M-100:Q6_K:$dir/M-100-Q6_K.gguf" --gguf "M-100:IQ4_XS:$dir/M-100-IQ4_XS.gguf" \
  --decode-batches 1,8 \
  --mixed 0:1:512:0,1:7:73:256,4:4:127:512,0:1:512:320 --commit "$commit" \
  --out "$out-model.json" | tee "$out-model.txt"
# One thread, the 2048 x 768 gate shape: F16, Q8_0, Q4_K, Q6_K at 1-32 tokens, from the
# caches and from DRAM (DType numbers: 1 f16, 3 q8_0, 5 q4_k, 11 q5_k, 12 q6_k); the
# K-quants' lane tiles beside their 8-row token tiles at 8 tokens.
"$bin/pensieve-microbench" \
  --benchmark_filter='BM_MatmulBatch/(1|3|5|12)/(1|4|8|32)/|BM_KQuantBatch/(5|11|12)/(8|64)/|BM_LanePrefetch/(5|12)/(1|8)/|BM_FmaPeak|BM_Int8DotPeak' \
  --benchmark_min_time=0.2 --benchmark_out="$out-micro.json" --benchmark_out_format=json
# Two threads, one token, every type from a 1 GiB ring, each sweep of the ring followed by one
# read of the 1 GiB read ceiling, 15 pairs a type: the median of the pairs' ratios ("share"),
# each pair at the memory speed of its moment.
"$bin/pensieve-microbench" --benchmark_filter='BM_DecodeShare2Threads' \
  --benchmark_out="$out-decode.json" --benchmark_out_format=json
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
