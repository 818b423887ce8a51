#!/usr/bin/env bash
# Builds one libFuzzer target straight from the parser sources with clang
# (-fsanitize=fuzzer,address,undefined) and runs it for a bounded time from a
# small generated seed corpus. Fails on any crash, sanitizer report or leak.
#   usage: run_fuzz.sh TARGET WORK_DIR [SECONDS]
#   TARGET: gguf, safetensors (model files), chat_request (the OpenAI routes'
#   JSON bodies), ws_message (the WebSocket chat protocol), history_journal
#   (the journal replay), disk_chunk (the disk KV tier's slot check), jinja
#   (the chat-template parser and renderer), rpc_turn (a Cap'n Proto message
#   as the RPC service's calls convert it)
# WORK_DIR is this run's alone: it is emptied of corpora first (two runs
# sharing one would delete each other's inputs mid-run).
set -euo pipefail
target=$1
work=$2
seconds=${3:-20}
root=$(cd "$(dirname "$0")/../../.." && pwd)
cxx=${FUZZ_CXX:-clang++-14}
formats=$root/gpu/formats
model=$root/gpu/model
json_src=$root/tests/gpu/fuzz/boost_json_src.cpp
text=$root/gpu/text
# The tokenizer readers check the pre-tokenizer they name, so they need its table and splitters.
common=("$formats/gguf_reader.cpp" "$formats/gguf_file.cpp" "$formats/gguf_value.cpp" "$model/gguf_tokenizer.cpp"
        "$formats/mmap_file.cpp" "$formats/tensor.cpp" "$text/pre_tokenizer.cpp" "$text/pre_split_passes.cpp"
        "$text/unicode_tables.cpp" "$text"/unicode_categories/*.cpp)
# The targets after the model files write their own seeds (seed_hook.hpp).
libs=()
case $target in
  gguf) fuzz=$root/tests/gpu/fuzz/fuzz_gguf.cpp
        sources=("${common[@]}" "$model/gguf_loader.cpp" "$model/gguf_architecture.cpp" "$model/model_loader_shapes.cpp"
                 "$formats/quant_block_check.cpp" "$root/gpu/kernels/cpu/dequant.cpp"
                 "$root/gpu/kernels/cpu/dequant_blocks.cpp") ;;
  safetensors) fuzz=$root/tests/gpu/fuzz/fuzz_safetensors.cpp
               sources=("${common[@]}" "$formats/safetensors_reader.cpp" "$model/hf_config.cpp"
                        "$model/tokenizer_json.cpp" "$json_src") ;;
  chat_request) fuzz=$root/tests/net/fuzz/fuzz_chat_request.cpp
                sources=("$root/net/chat_request_json.cpp" "$root/net/turn_validation.cpp" "$root/net/api_error.cpp"
                         "$json_src") ;;
  ws_message) fuzz=$root/tests/net/fuzz/fuzz_ws_message.cpp
              sources=("$root/net/ws_chat_protocol.cpp" "$root/net/turn_validation.cpp" "$json_src") ;;
  history_journal) fuzz=$root/tests/actors/fuzz/fuzz_history_journal.cpp
                   sources=("$root/actors/history_record.cpp"); libs=(-lz) ;;
  disk_chunk) fuzz=$root/tests/gpu/fuzz/fuzz_disk_chunk.cpp
              sources=("$root/gpu/kv/chunk_header.cpp" "$root/gpu/kv/chunk_checksum.cpp"); libs=(-lz) ;;
  jinja) fuzz=$root/tests/gpu/fuzz/fuzz_jinja.cpp
         sources=()
         for f in "$root"/gpu/text/jinja/*.cpp; do [[ $f == */json_value.cpp ]] || sources+=("$f"); done ;;
  rpc_turn) fuzz=$root/tests/net/fuzz/fuzz_rpc_turn.cpp
            # The schema's C++ as the build generates it, into this run's folder.
            mkdir -p "$work/gen"
            capnp compile --src-prefix="$root" -oc++:"$work/gen" "$root/schemas/pensieve.capnp"
            sources=("$root/net/rpc_convert.cpp" "$root/net/turn_validation.cpp" "$root/net/api_error.cpp"
                     "$work/gen/schemas/pensieve.capnp.c++" "$json_src")
            libs=(-I"$work/gen" -lcapnp-rpc -lcapnp -lkj-async -lkj) ;;
  *) echo "run_fuzz.sh: unknown target '$target'" \
          "(gguf, safetensors, jinja, chat_request, ws_message, history_journal, disk_chunk, rpc_turn)" >&2; exit 2 ;;
esac
# A fixed seed, a fresh seed corpus and a fixed number of runs make each run
# explore the same inputs, so CI is reproducible; the time is only a cap, and
# each target's runs end well inside it. The template parser takes whole chat
# templates: 150,000 runs did not end in the 60 s cap (53,648 did, 2026-12-07,
# AMD EPYC Zen 4), so it runs 30,000 (about 35 s there). The others' 150,000
# take 1-13 s. Fuzz longer by hand with FUZZ_RUNS=-1 (and a larger time).
default_runs=150000
[[ $target == jinja ]] && default_runs=30000
runs=${FUZZ_RUNS:-$default_runs}
corpus=$work/corpus_$target
rm -rf "$work"/corpus_*
mkdir -p "$corpus"
# Line tables (-g1) are all a sanitizer's stack needs.
flags=(-std=c++20 -O1 -g1 -I"$root" -DBOOST_JSON_NO_LIB -DBOOST_CONTAINER_NO_LIB)
"$cxx" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  "$fuzz" "${sources[@]}" "${libs[@]}" -o "$work/fuzz_$target"
case $target in
  gguf|safetensors)
    # Both model formats' seeds come from their writers (needing no sanitizers
    # nor debug information, so built at -O0).
    mkdir -p "$work/corpus_gguf" "$work/corpus_safetensors"
    "$cxx" "${flags[@]}" -O0 -g0 "$root/tests/gpu/fuzz/make_seeds.cpp" "$formats/gguf_writer.cpp" "$formats/gguf_value.cpp" \
      "$formats/gguf_reader.cpp" "$formats/gguf_file.cpp" "$formats/mmap_file.cpp" "$formats/safetensors_writer.cpp" \
      "$formats/tensor.cpp" "$json_src" -o "$work/make_seeds"
    "$work/make_seeds" "$work/corpus_gguf" "$work/corpus_safetensors" ;;
  jinja)
    # The template parser's seeds: the real chat templates the oracle test uses.
    cp "$root"/tests/gpu/chat_templates/templates/*.jinja "$corpus/" ;;
  *)
    # The target writes its own seeds (tests/gpu/fuzz/seed_hook.hpp).
    PENSIEVE_FUZZ_WRITE_SEEDS=$corpus "$work/fuzz_$target"
    if [[ -z $(ls -A "$corpus") ]]; then
      echo "run_fuzz.sh: $target wrote no seeds into $corpus" >&2
      exit 1
    fi ;;
esac
# -rss_limit_mb: a parser that allocates what a fuzzed length asks for fails here.
"$work/fuzz_$target" -seed=1 -runs="$runs" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$work/crash_${target}_" "$corpus"
