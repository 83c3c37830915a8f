#!/usr/bin/env bash
# Sets up, builds, and runs the spec's examples, printing their outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# ccache keys on paths relative to the checkout, so a fresh clone reuses earlier builds.
export CCACHE_BASEDIR="$PWD"
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" >/dev/null
for example in examples/*.cpp; do
  name=$(basename "$example" .cpp)
  echo "== $name"
  "build/release/example_$name"
done
