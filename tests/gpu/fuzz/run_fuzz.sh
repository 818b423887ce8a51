#!/usr/bin/env bash
# Builds one libFuzzer target straight from the parser sources with clang
# (-fsanitize=fuzzer,address,undefined) and runs it for a bounded time from a
# small generated seed corpus. Fails on any crash, sanitizer report or leak.
#   usage: run_fuzz.sh gguf|safetensors|jinja WORK_DIR [SECONDS]
# WORK_DIR is this run's alone: it is emptied of corpora first (two runs
# sharing one would delete each other's inputs mid-run).
set -euo pipefail
target=$1
work=$2
seconds=${3:-20}
root=$(cd "$(dirname "$0")/../../.." && pwd)
cxx=${FUZZ_CXX:-clang++-14}
model=$root/gpu/model
common=("$model/gguf_reader.cpp" "$model/gguf_file.cpp" "$model/gguf_value.cpp" "$model/gguf_tokenizer.cpp"
        "$model/mmap_file.cpp" "$model/tensor.cpp")
case $target in
  gguf) sources=("${common[@]}" "$model/gguf_loader.cpp" "$model/model_loader_shapes.cpp") ;;
  safetensors) sources=("${common[@]}" "$model/safetensors_reader.cpp" "$model/hf_config.cpp"
                        "$model/tokenizer_json.cpp" "$root/tests/gpu/fuzz/boost_json_src.cpp") ;;
  jinja) sources=("$root"/gpu/text/jinja/*.cpp)
         sources=("${sources[@]/*json_value.cpp/}") ;;
  *) echo "run_fuzz.sh: unknown target '$target' (gguf, safetensors, jinja)" >&2; exit 2 ;;
esac
# A fixed seed, a fresh seed corpus and a fixed number of runs make each run
# explore the same inputs, so CI is reproducible; the time is only a cap.
# Fuzz longer by hand with FUZZ_RUNS=-1 (and a larger time).
runs=${FUZZ_RUNS:-150000}
rm -rf "$work/corpus_gguf" "$work/corpus_safetensors" "$work/corpus_jinja"
mkdir -p "$work/corpus_gguf" "$work/corpus_safetensors" "$work/corpus_jinja"
# The template parser's seeds: the real chat templates the oracle test uses.
cp "$root"/tests/gpu/chat_templates/templates/*.jinja "$work/corpus_jinja/"
flags=(-std=c++20 -O1 -g -I"$root" -DBOOST_JSON_NO_LIB -DBOOST_CONTAINER_NO_LIB)
# Seeds: built with the same compiler, no sanitizers needed.
"$cxx" "${flags[@]}" "$root/tests/gpu/fuzz/make_seeds.cpp" "$model/gguf_writer.cpp" "$model/gguf_value.cpp" \
  "$model/gguf_reader.cpp" "$model/gguf_file.cpp" "$model/mmap_file.cpp" "$model/safetensors_writer.cpp" "$model/tensor.cpp" \
  "$root/tests/gpu/fuzz/boost_json_src.cpp" -o "$work/make_seeds"
"$work/make_seeds" "$work/corpus_gguf" "$work/corpus_safetensors"
sources=($(printf '%s\n' "${sources[@]}" | grep .))
"$cxx" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  "$root/tests/gpu/fuzz/fuzz_$target.cpp" "${sources[@]}" -o "$work/fuzz_$target"
# -rss_limit_mb: a parser that allocates what a fuzzed length asks for fails here.
"$work/fuzz_$target" -seed=1 -runs="$runs" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$work/crash_${target}_" "$work/corpus_$target"
