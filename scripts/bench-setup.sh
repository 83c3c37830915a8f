#!/usr/bin/env bash
# Makes the language-model benchmarks' anchor, outside the repository (a cache, like .venv):
# llama.cpp's own `llama-bench`, `llama-batched-bench` and `llama-quantize`, compiled for this CPU
# (GGML_NATIVE) from the llama.cpp tree inside llama-cpp-python's PyPI sdist (the only registry we
# may use); and .venv-bench with numpy/gguf (the shaped models' writer) and, with --kl,
# llama-cpp-python itself (bench_llm.py kl reads every position's logits through its C API).
# Safe to run again: each step is skipped when its result is there.
#   scripts/bench-setup.sh [--kl]      LLAMA_CPP_DIR (default ~/.cache/gizml-bench) holds the build
# LLAMA_ISA=avx2 builds the anchor for AVX2/FMA/F16C only (a Zen 3's level), to set beside our own
# kernels capped the same way (GIZML_CPU_ISA=avx2) on a machine with AVX-512; give it its own
# LLAMA_CPP_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.3.36  # llama-cpp-python's sdist; its vendor/llama.cpp is the anchor's source
cache="${LLAMA_CPP_DIR:-$HOME/.cache/gizml-bench}"
venv=.venv-bench
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import numpy, gguf" 2>/dev/null || "$venv/bin/pip" install -q numpy gguf

tools=(llama-bench llama-batched-bench llama-quantize)
# GGML_NATIVE, except where the CPU shows AMX: there GGML_NATIVE builds llama.cpp's AMX path, which
# dies in ldtilecfg on our Intel machines (SIGSEGV in ggml_backend_amx_mul_mat on every model;
# llama.cpp issue 20824), so the anchor gets every other ISA this CPU shows, named one by one.
isa=(-DGGML_NATIVE=ON)
if [ "${LLAMA_ISA:-native}" = avx2 ]; then
  isa=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
       -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
elif [ "${LLAMA_ISA:-native}" != native ]; then
  echo "bench-setup: LLAMA_ISA is native or avx2, not '$LLAMA_ISA'" >&2; exit 2
elif grep -qw amx_int8 /proc/cpuinfo; then
  flags=" $(grep -m1 -w flags /proc/cpuinfo | cut -d: -f2) "
  has() { [[ "$flags" == *" $1 "* ]] && echo ON || echo OFF; }
  isa=(-DGGML_NATIVE=OFF -DGGML_SSE42="$(has sse4_2)" -DGGML_AVX="$(has avx)" -DGGML_AVX2="$(has avx2)"
       -DGGML_FMA="$(has fma)" -DGGML_F16C="$(has f16c)" -DGGML_BMI2="$(has bmi2)" -DGGML_AVX_VNNI="$(has avx_vnni)"
       -DGGML_AVX512="$(has avx512bw)" -DGGML_AVX512_VBMI="$(has avx512vbmi)" -DGGML_AVX512_VNNI="$(has avx512_vnni)"
       -DGGML_AVX512_BF16="$(has avx512_bf16)" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
fi
missing=0
for t in "${tools[@]}"; do [ -x "$cache/build/bin/$t" ] || missing=1; done
[ "$(cat "$cache/build/isa-flags" 2>/dev/null)" = "${isa[*]}" ] || missing=1
if [ "$missing" = 1 ]; then
  mkdir -p "$cache/sdist"
  sdist="$cache/sdist/llama_cpp_python-$version.tar.gz"
  [ -f "$sdist" ] || "$venv/bin/pip" download -q --no-deps --no-binary :all: -d "$cache/sdist" \
    "llama-cpp-python==$version"
  rm -rf "$cache/src" "$cache/build" && mkdir -p "$cache/src"
  tar -xzf "$sdist" -C "$cache/src" --strip-components=3 "llama_cpp_python-$version/vendor/llama.cpp"
  # Only the tools we run: no server, tests, examples, HTTPS or shared libraries.
  cmake -S "$cache/src" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${isa[@]}" \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >/dev/null
  cmake --build "$cache/build" -j "${JOBS:-$(nproc)}" --target "${tools[@]}"
  echo "${isa[*]}" > "$cache/build/isa-flags"
fi
# --no-binary: built from the sdist, for this CPU with the anchor's ISA flags (an AMX build dies
# here as llama-bench's does); rebuilt when those flags change.
if [ "${1:-}" = --kl ] && { ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null ||
                            [ "$(cat "$venv/llama-cpp-isa" 2>/dev/null)" != "${isa[*]}" ]; }; then
  CMAKE_ARGS="${isa[*]}" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc)}" \
    "$venv/bin/pip" install -q --force-reinstall --no-deps --no-cache-dir --no-binary llama-cpp-python \
    "llama-cpp-python==$version"
  "$venv/bin/pip" install -q typing_extensions diskcache jinja2  # its imports (--no-deps left them out)
  echo "${isa[*]}" > "$venv/llama-cpp-isa"
fi
echo "bench-setup: $("$cache/build/bin/llama-bench" --version 2>&1 | head -1) in $cache/build/bin"
