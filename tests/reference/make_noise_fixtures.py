#!/usr/bin/env python3
"""torch's CPU noise for gizml::diffusion::torchRandn (tests/diffusion/torch_noise_test.cpp).

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_noise_fixtures.py
on an x86-64 CPU with AVX2 (torch's vectorised normal kernel; it also runs it on AVX-512 CPUs,
and the script refuses to run without it). Writes tests/data/diffusion/noise.bin in the GZFX
format of make_tensor_fixtures.py: one case per (seed, shape), op "randn", attribute "seed"
(the uint64 seed's bits as an int64), array "out" (F32) =
torch.randn(shape, dtype=torch.float32, generator=torch.manual_seed(seed), device="cpu"),
as ComfyUI's comfy/sample.py prepare_noise draws it; and cases of op "randn_next" (attributes
"seed" and "draw", array "out"): the draws of CHAIN's shapes one after another from one
torch.Generator().manual_seed(seed), as MiniMax H3's pipeline draws its video and then its audio
noise (TorchGenerator). The test compares bit for bit.
"""
import os
import sys

import numpy as np
import torch

from make_tensor_fixtures import F32, write_cases

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "diffusion", "noise.bin")

SEEDS = [0, 42, 2**32 + 5, 0xDEADBEEFCAFEF00D]
LATENT = [1, 16, 32, 32]  # a real latent (256x256 pixels), for two of the seeds
LATENT_SEEDS = (42, 0xDEADBEEFCAFEF00D)
SHAPES = [
    [64],             # a multiple of 16
    [37],             # not a multiple: the last 16 drawn again
    [2, 3, 5],        # 30: one block and an overlapping tail
    [16],             # exactly one block
    [15],             # under 16: the double path, odd count
    [2, 3],           # under 16, even count
    [1],
    [],               # a 0-d tensor
]
# One generator's draws in turn: a double-path draw of odd count leaves torch's cached normal for
# the next one under 16; the float path between leaves it there.
CHAIN_SEED = 42
CHAIN = [[1, 4, 5, 2, 3], [3], [37], [2, 2], [7], [64, 32]]


def randn(seed, shape):
    return torch.randn(shape, dtype=torch.float32, generator=torch.manual_seed(seed), device="cpu")


def main():
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        sys.exit(f"torch runs its {capability} kernels here; the fixtures need its AVX2 normal kernel")
    # torch.manual_seed keeps the seed's low 32 bits.
    assert torch.equal(randn(2**32 + 5, [37]), randn(5, [37]))
    cases = []
    for seed in SEEDS:
        signed = seed - 2**64 if seed >= 2**63 else seed
        for shape in ([LATENT] if seed in LATENT_SEEDS else []) + SHAPES:
            out = randn(seed, shape).numpy().astype(np.float32)
            name = f"seed_{seed}_shape_{'x'.join(map(str, shape)) or 'scalar'}"
            cases.append((name, "randn", {"seed": [signed]}, [("out", F32, out)]))
    generator = torch.Generator().manual_seed(CHAIN_SEED)
    for draw, shape in enumerate(CHAIN):
        out = torch.randn(shape, dtype=torch.float32, generator=generator).numpy()
        cases.append((f"chain_{CHAIN_SEED}_draw_{draw}", "randn_next", {"seed": [CHAIN_SEED], "draw": [draw]},
                      [("out", F32, out)]))
    size = write_cases(OUT, cases)
    print(f"wrote {len(cases)} cases, {size} bytes to {os.path.normpath(OUT)} (torch {torch.__version__}, {capability})")


if __name__ == "__main__":
    main()
