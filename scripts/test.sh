#!/usr/bin/env bash
# Sets up, builds and runs every test: the release build (g++), then the unit tests again under
# AddressSanitizer and UBSan, then a warning-free compile check with clang 14.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# ccache keys on paths relative to the checkout, so a fresh clone reuses earlier builds.
export CCACHE_BASEDIR="$PWD"
jobs=$(nproc)

cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "$jobs"
ctest --preset sanitize -j "$jobs" -LE "slow|emulator"

cmake --preset clang -DGIZML_BENCH=OFF -DCMAKE_CXX_FLAGS=-Werror >/dev/null
cmake --build --preset clang -j "$jobs"
echo "all tests passed"
