#!/usr/bin/env bash
# Makes the benchmark-only Python environment (.venv-bench): llama-cpp-python built from its PyPI
# sdist (this compiles llama.cpp with cmake for this CPU; it takes a while on a small machine) as the
# anchor of bench/bench_llm.py, plus gguf/numpy to write the shaped test model. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-bench
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import numpy, gguf" 2>/dev/null || "$venv/bin/pip" install -q numpy gguf
if ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
  # --no-binary: build from the sdist so llama.cpp is compiled natively (GGML_NATIVE) for this CPU.
  CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc)}" \
    "$venv/bin/pip" install -q --no-binary llama-cpp-python "llama-cpp-python==0.3.36"
fi
"$venv/bin/python" -c "import llama_cpp; print('bench-setup: llama-cpp-python', llama_cpp.__version__)"
