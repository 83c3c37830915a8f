#!/usr/bin/env bash
# Sets up, builds, and runs the spec's examples (printing their outputs), then asks the small real
# default model a question.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# ccache keys on paths relative to the checkout, so a fresh clone reuses earlier builds.
export CCACHE_BASEDIR="$PWD"
cmake --preset release >/dev/null
scripts/build-progress.sh release
for example in examples/*.cpp; do
  name=$(basename "$example" .cpp)
  echo "== $name"
  "build/release/example_$name"
done

# The main job: a chat answer from the small real default model (SmolLM2-135M-Instruct, installed
# from PyPI by setup.sh), converted to our 4-bit format on first use into ~/.cache/gizml/models.
echo "== giz run SmolLM2-135M-Instruct \"Name three rivers.\""
build/release/giz run "$(scripts/default-model.sh smollm2)" "Name three rivers." --max-tokens 80
echo
