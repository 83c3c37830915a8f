#!/usr/bin/env python3
"""ConvRot's W8A8 product on the CPU beside its anchor: our T::intMatmul (bench_int8_gemm, the
weight read as stored [n, k] rows) and torch._int_mm (oneDNN's int8 GEMM) on the same shapes and
threads, alternating `--rounds` times; the best GOP/s of each and the ratio ours / torch.

  bench_int8_gemm.py [--threads 2] [--rounds 3] [--shape M K N ...]

Run it with a Python that has torch (`pip install torch`). Default shapes: the DiT linears'
(Z-Image and klein at 1024 x 1024: 4096 tokens by 3072; H3's 5376 and 14336 widths).
"""
import argparse
import os
import pathlib
import re
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = os.environ.get("BENCH_INT8_GEMM", str(ROOT / "build/release/bench/bench_int8_gemm"))
SHAPES = [(4096, 3072, 3072), (4096, 3072, 12288), (256, 5376, 5376), (1024, 14336, 5376)]


def ours(shape, threads):
    env = dict(os.environ, GIZML_THREADS=str(threads))
    out = subprocess.run([BENCH, *map(str, shape)], env=env, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"^\d+x\d+x\d+\s+\S+\s+(\S+)$", out, re.M).group(1))


def torch_gops(shape, runs=3):
    import torch

    m, k, n = shape
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8)
    b = torch.randint(-128, 128, (k, n), dtype=torch.int8)
    torch._int_mm(a, b)
    best = 1e30
    for _ in range(runs):
        t = time.perf_counter()
        torch._int_mm(a, b)
        best = min(best, time.perf_counter() - t)
    return 2.0 * m * k * n / best * 1e-9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--shape", type=int, nargs=3, action="append", metavar=("M", "K", "N"))
    args = p.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}, torch {torch.__version__}")
    print(f"{'m x k x n':22} {'ours GOP/s':>11} {'torch':>8} {'ratio':>6}")
    for shape in args.shape or SHAPES:
        best_ours = best_torch = 0.0
        for _ in range(args.rounds):
            best_ours = max(best_ours, ours(shape, args.threads))
            best_torch = max(best_torch, torch_gops(shape))
        name = "x".join(map(str, shape))
        print(f"{name:22} {best_ours:11.1f} {best_torch:8.1f} {best_ours / best_torch:6.2f}", flush=True)


if __name__ == "__main__":
    main()
