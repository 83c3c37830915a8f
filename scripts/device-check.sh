#!/usr/bin/env bash
# The GPU check, in one go on a machine with an NVIDIA GPU (here: the lent H200 machine, 16 cores,
# CUDA 13, driver 580). It runs the GPU tests, the example, and the GPU benchmarks beside their
# anchors (a device-to-device copy; torch.matmul for BF16 matmul, torch._int_mm for the INT8
# one), and writes a log and a results file under $OUT (or ./device-check-out). Budget: under 8 minutes.
#
# That machine lacks our Debian packages (Highway, GoogleTest, Google Benchmark), so the build is
# made here and carried:
#   scripts/device-check.sh --pack      # here: Release build, then .device/ = the binaries + the
#                                       # shared libraries they need that are not in glibc, packed
#                                       # as .device.tar.xz (~15 MB: the working tree and what is
#                                       # carried travel within 64 MiB together)
#   device run (carry .device.tar.xz):  scripts/device-check.sh
# On the device the script unpacks .device.tar.xz and uses .device/ (LD_LIBRARY_PATH=.device/lib), else it
# tries a Release build with what is installed there (needs libhwy, gtest, benchmark).
# Nothing here changes the GPU's settings.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [ "${1:-}" = "--pack" ]; then
  set -e
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target test_gpu test_netops test_tile test_grad test_llm bench_gpu \
    bench_tile_gpu bench_attention_rows bench_netops_gpu example_02_gpu example_train_mlp giz test_diffusion
  rm -rf .device && mkdir -p .device/bin .device/lib
  cp build/release/tests/test_gpu build/release/tests/test_netops build/release/tests/test_tile build/release/tests/test_grad \
    build/release/tests/test_llm build/release/bench/bench_gpu build/release/bench/bench_tile_gpu build/release/bench/bench_attention_rows \
    build/release/bench/bench_netops_gpu build/release/example_02_gpu build/release/giz \
    build/release/example_train_mlp build/release/tests/test_diffusion .device/bin/
  # Every shared library the binaries load except the C library itself (the device image may
  # have another libstdc++, Highway or GoogleTest, or none).
  for b in .device/bin/*; do
    ldd "$b" | awk '/=> \// {print $3}'
  done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | xargs -r -I{} cp -L {} .device/lib/
  # Symbols are not needed there, and the carried folder must stay under 64 MiB.
  chmod u+w .device/lib/* && strip --strip-unneeded .device/bin/* .device/lib/*
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
  grep -qx '/.device.tar.xz' "$exclude" 2>/dev/null || echo '/.device.tar.xz' >> "$exclude"
  # The tests read their fixtures where this checkout is (GIZML_TEST_DATA is compiled in).
  pwd > .device/source_root
  tar -cf - .device | xz -T"$(nproc)" -6 > .device.tar.xz
  du -sh .device .device.tar.xz
  echo "packed: carry .device.tar.xz and run scripts/device-check.sh there"
  exit 0
fi

out=${OUT:-$root/device-check-out}
mkdir -p "$out"
log=$out/device-check.log
results=$out/results.txt
: >"$results"
exec > >(tee "$log") 2>&1
start=$(date +%s)
note() { echo "$*" | tee -a "$results"; }
# A RESULT recorded earlier in this run, by its key (nothing if none).
result() { awk -v k="$1" '$2 == k {print $3}' "$results"; }
# RESULT $3: result $1 (ours) over result $2 (the anchor's), when both were recorded.
ratio() {
  local a b
  a=$(result "$1") b=$(result "$2")
  if [ -n "$a" ] && [ -n "$b" ]; then note "RESULT $3 $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", a / b}')"; fi
}

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | head -3
nproc

[ -f .device.tar.xz ] && [ ! -d .device/bin ] && tar -xJf .device.tar.xz
if [ -d .device/bin ]; then
  bin=$root/.device/bin
  export LD_LIBRARY_PATH=$root/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "== using the carried build in .device"
  built=$(cat .device/source_root 2>/dev/null || true)
  if [ -n "$built" ] && [ "$built" != "$root" ] && [ ! -e "$built" ]; then
    mkdir -p "$(dirname "$built")" && ln -s "$root" "$built" && echo "linked $built -> $root (the tests' fixtures)"
  fi
else
  echo "== no .device: building here"
  cmake -S . -B build/device -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build/device -j "$(nproc)" --target test_gpu test_netops test_tile test_grad test_llm bench_gpu \
      bench_tile_gpu bench_attention_rows bench_netops_gpu example_02_gpu example_train_mlp giz test_diffusion ||
    { note "BUILD FAILED"; exit 1; }
  mkdir -p build/device/bin
  cp build/device/tests/test_gpu build/device/tests/test_netops build/device/tests/test_tile build/device/tests/test_grad \
    build/device/tests/test_llm build/device/giz build/device/bench/bench_gpu build/device/bench/bench_tile_gpu build/device/bench/bench_attention_rows \
    build/device/bench/bench_netops_gpu build/device/example_02_gpu \
    build/device/example_train_mlp build/device/tests/test_diffusion build/device/bin/
  bin=$root/build/device/bin
fi
export XDG_CACHE_HOME=/tmp/gizml-device-cache
rm -rf "$XDG_CACHE_HOME"

echo "== example 02_gpu (first run compiles, second reads the kernel cache)"
for i in 1 2; do
  t0=$(date +%s.%N)
  line=$(timeout 120 "$bin/example_02_gpu")
  t1=$(date +%s.%N)
  echo "$line  ($(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s)"
done
[ "$line" = "[[4, 5], [10, 11]]" ] && note "example_02_gpu: ok" || note "example_02_gpu: WRONG ($line)"

echo "== GPU tests"
timeout 300 "$bin/test_gpu" --gtest_filter='Gpu.*:Graphs.*:StepGraphs.*:KernelCache.*:NoLink.OpenNeverThrows:KernelsCompile.ElementwiseSource*:GpuIntMatmul.*' \
  >"$out/test_gpu.txt" 2>&1
status=$?
tail -80 "$out/test_gpu.txt"
note "test_gpu: exit $status, $(grep -c '^\[       OK \]' "$out/test_gpu.txt") passed, $(grep '^\[  FAILED  \] [A-Za-z]*\.' "$out/test_gpu.txt" | cut -c14- | cut -d' ' -f1 | sort -u | wc -l) failed, $(grep '^\[  SKIPPED \] [A-Za-z]*\.' "$out/test_gpu.txt" | cut -c14- | cut -d' ' -f1 | sort -u | wc -l) skipped"

echo "== netops on the GPU (the same bits as the host where the reference says so)"
timeout 180 "$bin/test_netops" --gtest_filter='*Gpu*' \
  >"$out/test_netops.txt" 2>&1
status=$?
tail -40 "$out/test_netops.txt"
note "test_netops (GPU): exit $status, $(grep -c '^\[       OK \]' "$out/test_netops.txt") passed, $(grep -c '^\[  FAILED  \] [A-Za-z]*\.' "$out/test_netops.txt") failed lines"

echo "== tile programs on the GPU (against the CPU executor; never run on a GPU before this script)"
timeout 150 "$bin/test_tile" --gtest_filter='TileGpu.*:TileCpu.*' >"$out/test_tile.txt" 2>&1
status=$?
tail -60 "$out/test_tile.txt"
note "test_tile (GPU): exit $status, $(grep -c '^\[       OK \] TileGpu\.' "$out/test_tile.txt") TileGpu passed, $(grep '^\[  FAILED  \] TileGpu\.' "$out/test_tile.txt" | cut -c14- | cut -d' ' -f1 | sort -u | wc -l) failed, $(grep '^\[  SKIPPED \] TileGpu\.' "$out/test_tile.txt" | cut -c14- | cut -d' ' -f1 | sort -u | wc -l) skipped"
# The products again without TMA, and on mma.sync instead of wgmma: which Hopper path fails, if one does.
for variant in "GIZML_TILE_TMA=0" "GIZML_TILE_ARCH=80"; do
  env "$variant" timeout 60 "$bin/test_tile" --gtest_filter='TileGpu.Product*' >"$out/test_tile_$variant.txt" 2>&1
  note "test_tile products with $variant: exit $?, $(grep -c '^\[       OK \] TileGpu\.' "$out/test_tile_$variant.txt") passed, $(grep '^\[  FAILED  \] TileGpu\.' "$out/test_tile_$variant.txt" | cut -c14- | cut -d' ' -f1 | sort -u | wc -l) failed"
done

echo "== gradients on the GPU"
timeout 120 "$bin/test_grad" --gtest_filter='GradGpu.*' >"$out/test_grad.txt" 2>&1
note "test_grad (GPU): exit $?, $(grep -c '^\[       OK \] GradGpu' "$out/test_grad.txt") passed, $(grep -c '^\[  FAILED  \] GradGpu' "$out/test_grad.txt") failed"

echo "== training on the GPU (the MLP's loss curve against the CPU's)"
timeout 120 "$bin/example_train_mlp" >"$out/train_mlp.txt" 2>&1
status=$?
tail -4 "$out/train_mlp.txt"
note "example_train_mlp (CPU and GPU): exit $status; $(grep '^on ' "$out/train_mlp.txt" | head -1)"

echo "== language models on the GPU (the tiny fixtures of six architectures against transformers and the CPU;"
echo "   the tensor-core linears and attention, the chunked attention, the chunked delta rule, penalties on the device,"
echo "   the pinned upload)"
timeout 150 "$bin/test_llm" --gtest_filter='*GpuModel*:*GpuQwen35*:*GpuDeltaNet*:*GpuAttentionTiles*:*GpuPictureRows*:*GpuWeightUpload*' \
  >"$out/test_llm_gpu.txt" 2>&1
status=$?
grep -E 'bits, KV|positions|states|context error|FAILED' "$out/test_llm_gpu.txt" | head -50
note "test_llm (GPU models): exit $status, $(grep -c '^\[       OK \]' "$out/test_llm_gpu.txt") passed, $(grep '^\[  FAILED  \] [A-Za-z/]*\.' "$out/test_llm_gpu.txt" | cut -c14- | cut -d' ' -f1 | sort -u | wc -l) failed"

echo "== diffusion on the GPU (Z-Image's DiT, FLUX.1's VAE decoder and the INT8 pipeline's tiny picture against the host)"
timeout 120 "$bin/test_diffusion" --gtest_filter='*Gpu*' >"$out/test_diffusion_gpu.txt" 2>&1
status=$?
grep -E 'FAILED|within' "$out/test_diffusion_gpu.txt" | head -20
note "test_diffusion (GPU): exit $status, $(grep -c '^\[       OK \]' "$out/test_diffusion_gpu.txt") passed, $(grep '^\[  FAILED  \] [A-Za-z/]*\.' "$out/test_diffusion_gpu.txt" | cut -c14- | cut -d' ' -f1 | sort -u | wc -l) failed"

# giz bench on a model with random weights made here (no download) and converted to our 4-bit
# format: NAME, the command that writes its Hugging Face folder to $dir-hf, then giz bench's
# argument sets. RESULT NAME_<args>_{prefill,decode}_tok_s each, and the batch-1 decode's share of
# the H200's HBM roofline (weight bytes x tok/s / 4.8 TB/s).
bench_shaped() {
  local name=$1 make=$2 dir=/tmp/gizml-$1
  shift 2
  echo "== giz bench on the GPU: $name at 4 bits ($make)"
  if ! { timeout 180 $make "$dir-hf" && timeout 150 "$bin/giz" convert "$dir-hf" "$dir" >/dev/null; }; then
    note "$name: could not be made or converted"
    return
  fi
  rm -rf "$dir-hf"
  local bytes args line tag v key
  bytes=$(stat -c %s "$dir/weights.bin")
  for args in "$@"; do
    line=$(timeout 120 "$bin/giz" bench "$dir" $args 2>&1 | tail -1)
    echo "giz bench $args: $line"
    tag=$(echo "$args" | tr -d '-' | tr ' ' '_')
    for key in prefill_tok_s decode_tok_s; do
      v=$(echo "$line" | python3 -c "import json,sys; print(round(json.load(sys.stdin)['$key'], 1))" 2>/dev/null)
      [ -n "$v" ] && note "RESULT ${name}_${tag}_${key} $v"
    done
  done
  v=$(result "${name}_device_gpu_prefill_512_decode_64_decode_tok_s")
  [ -n "$v" ] && note "RESULT ${name}_decode_hbm_share $(awk -v t="$v" -v b="$bytes" 'BEGIN {printf "%.4f", t * b / 4.8e12}') (weights $bytes bytes x tok/s / 4.8 TB/s)"
  rm -rf "$dir"
}
bench_shaped qwen3s_4bit "python3 bench/make_qwen3_shaped_hf.py --shape 0.6b" \
  "--device gpu --prefill 512 --decode 64" "--device gpu --prefill 2048 --decode 16" \
  "--device gpu --prefill 128 --decode 32 --batch 32" "--device gpu --prefill 512 --decode 32 --kv 8" \
  "--device cpu --prefill 512 --decode 32"
# Qwen3-8B's layers (4 of its 36: the per-layer shapes and the untied head; writing them took 51 s
# a layer's worth plus the embeddings on the 2-core machine) within the budget.
bench_shaped qwen3_8b_4layers_4bit "python3 bench/make_qwen3_shaped_hf.py --shape 8b --layers 4" \
  "--device gpu --prefill 512 --decode 64" "--device gpu --prefill 2048 --decode 16" \
  "--device gpu --prefill 128 --decode 32 --batch 32" "--device gpu --prefill 128 --decode 32 --batch 64"
# Qwen3.5-0.8B's shape: Gated DeltaNet layers (the chunked rule for the prompts) and gated attention.
bench_shaped qwen35s_4bit "python3 bench/make_qwen35_shaped_hf.py" \
  "--device gpu --prefill 512 --decode 64" "--device gpu --prefill 2048 --decode 16" \
  "--device gpu --prefill 128 --decode 32 --batch 32" "--device gpu --prefill 512 --decode 32 --kv 8"

echo "== GPU benchmarks"
timeout 180 "$bin/bench_gpu" 2>&1 | tee "$out/bench_gpu.txt"
grep '^RESULT' "$out/bench_gpu.txt" | tee -a "$results"

echo "== tile product benchmark (BF16, tensor cores)"
timeout 120 "$bin/bench_tile_gpu" 2>&1 | tee "$out/bench_tile_gpu.txt"
grep '^RESULT' "$out/bench_tile_gpu.txt" | tee -a "$results"

echo "== attentionRows (BF16 tensor cores, 8-bit) and neighborhood3d"
timeout 150 "$bin/bench_attention_rows" 2>&1 | tee "$out/bench_attention_rows.txt"
grep '^RESULT' "$out/bench_attention_rows.txt" | tee -a "$results"

echo "== torch scaled_dot_product_attention anchor (flash backend), the same shapes"
timeout 150 python3 - <<'PY' 2>&1 | tee -a "$results"
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
heads = 24
for head in (64, 128):
    for n in (1024, 4096, 16384):
        q, k, v = (torch.randn(1, heads, n, head, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            for _ in range(3): torch.nn.functional.scaled_dot_product_attention(q, k, v)
            torch.cuda.synchronize()
            times = []
            for _ in range(10):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); torch.nn.functional.scaled_dot_product_attention(q, k, v); e.record(); e.synchronize()
                times.append(s.elapsed_time(e))
        ms = sorted(times)[len(times) // 2]
        print(f"RESULT torch_sdpa_h{head}_n{n}_tflops {4 * n * n * heads * head / ms / 1e9:.2f}")
PY
for head in 64 128; do
  for n in 1024 4096 16384; do
    for kind in bf16 int8; do
      ratio "attention_rows_${kind}_h${head}_n${n}_tflops" "torch_sdpa_h${head}_n${n}_tflops" \
        "attention_rows_${kind}_h${head}_n${n}_ratio_to_sdpa"
    done
  done
done

echo "== lazyConv (implicit GEMM) and the row kernels"
timeout 120 "$bin/bench_netops_gpu" 2>&1 | tee "$out/bench_netops_gpu.txt"
grep '^RESULT' "$out/bench_netops_gpu.txt" | tee -a "$results"

echo "== torch conv2d anchor (cuDNN, BF16), the same shapes"
timeout 120 python3 - <<'PY' 2>&1 | tee -a "$results"
import torch
torch.backends.cudnn.benchmark = True
for c, h, w in ((512, 64, 64), (512, 128, 128), (256, 256, 256), (128, 512, 512)):
    x = torch.randn(1, c, h, w, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(c, c, 3, 3, device="cuda", dtype=torch.bfloat16) * 0.02
    for _ in range(3): torch.nn.functional.conv2d(x, k, padding=1)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); torch.nn.functional.conv2d(x, k, padding=1); e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    ms = sorted(times)[len(times) // 2]
    print(f"RESULT torch_conv2d_c{c}_{h}x{w}_tflops {2 * c * c * 9 * h * w / ms / 1e9:.2f}")
PY
for shape in c512_64x64 c512_128x128 c256_256x256 c128_512x512; do
  ratio "lazyconv_${shape}_tflops" "torch_conv2d_${shape}_tflops" "lazyconv_${shape}_ratio_to_cudnn"
done

echo "== torch.matmul BF16 anchor"
timeout 120 python3 - <<'PY' 2>&1 | tee -a "$results"
import torch
for n in (4096, 8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3): a @ b
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a @ b; e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    ms = sorted(times)[len(times) // 2]
    print(f"RESULT torch_matmul_bf16_{n}_tflops {2 * n**3 / ms / 1e9:.2f}")
PY
for n in 4096 8192; do
  ratio "matmul_bf16_${n}_tflops" "torch_matmul_bf16_${n}_tflops" "matmul_bf16_${n}_ratio_to_torch"
  for s in best tuned; do
    ratio "tile_matmul_bf16_${n}_${s}_tflops" "torch_matmul_bf16_${n}_tflops" "tile_matmul_bf16_${n}_${s}_ratio_to_torch"
  done
done

echo "== torch._int_mm INT8 anchor"
timeout 120 python3 - <<'PY' 2>&1 | tee -a "$results"
import torch
for n in (3072, 8192):
    a = torch.randint(-127, 128, (4096, n), device="cuda", dtype=torch.int8)
    b = torch.randint(-127, 128, (n, n), device="cuda", dtype=torch.int8)
    for _ in range(3): torch._int_mm(a, b)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); torch._int_mm(a, b); e.record(); e.synchronize()
        times.append(s.elapsed_time(e))
    ms = sorted(times)[len(times) // 2]
    print(f"RESULT torch_int_mm_4096x{n}_tops {2 * 4096 * n * n / ms / 1e9:.2f}")
PY
for n in 3072 8192; do
  ratio "int_matmul_4096x${n}_tops" "torch_int_mm_4096x${n}_tops" "int_matmul_4096x${n}_ratio_to_torch"
done

note "elapsed $(( $(date +%s) - start )) s"
