#!/usr/bin/env bash
# Sets up, builds and runs every test: the release build (g++), then the unit tests again under
# AddressSanitizer and UBSan, then a warning-free compile check with clang 14.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# ccache keys on paths relative to the checkout, so a fresh clone reuses earlier builds; without
# CCACHE_NOHASHDIR it also keys every object built with debug information (the sanitize build's
# line tables) on the build folder, so that a clone elsewhere compiled all of it again (51 minutes
# on a Zen 3: CI ran out of time).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
jobs=$(nproc)

cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "$jobs"
ctest --preset sanitize -j "$jobs" -LE "slow|emulator"

# A warning check: clang's warnings come from its front end, so -O0 finds the same ones faster.
cmake --preset clang -DGIZML_BENCH=OFF -DCMAKE_CXX_FLAGS=-Werror "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG" >/dev/null
cmake --build --preset clang -j "$jobs"
echo "all tests passed"
