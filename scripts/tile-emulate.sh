#!/usr/bin/env bash
# Runs the generated CUDA of the tests' tile programs on the host against the CPU executor
# (tools/tile_emulate/emulate.cpp): a check of src/tile/cuda_codegen*.cpp without a GPU. Takes a
# few minutes (each kernel is compiled by g++; every CUDA thread is a host thread).
#   scripts/tile-emulate.sh            # every program
#   scripts/tile-emulate.sh bf16       # one (guide f32 bf16 f16 big cast softmax fold every
#                                      #      broadcast reductions masks transposed)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export CCACHE_BASEDIR=$root
cmake --preset release >/dev/null
cmake --build --preset release --target gizml >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -std=c++20 -O1 -Iinclude -Isrc -Itests/tile tools/tile_emulate/emulate.cpp -o "$work/emulate" \
  build/release/libgizml.a -lhwy -ldl -lpthread
cd "$work"
./emulate "$@"
