#!/usr/bin/env bash
# Builds a preset (default: release) and says where it is: a line every 10 % of ninja's steps.
# The whole log stays in build/PRESET/build.log; its end is printed when the build fails.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
log=build/$preset/build.log
mkdir -p "build/$preset"
echo "build: compiling gizml ($preset); a first build takes about 15 minutes on 2 cores, later ones reuse ccache"
start=$SECONDS
if ! cmake --build --preset "$preset" -j "$(nproc)" 2>&1 | tee "$log" | awk '
    match($0, /^\[[0-9]+\/[0-9]+\]/) {
      split(substr($0, 2, RLENGTH - 2), n, "/")
      percent = int(100 * n[1] / n[2])
      if (percent >= shown + 10 || n[1] == n[2]) {
        shown = percent - percent % 10
        printf "build: %3d %% (%d of %d steps)\n", percent, n[1], n[2]
        fflush()
      }
    }'; then
  echo "build: failed; the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
echo "build: done in $((SECONDS - start)) s"
