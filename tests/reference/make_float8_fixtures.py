#!/usr/bin/env python3
"""All 256 codes of F8_E4M3 and F8_E5M2 as torch writes and reads them, for
tests/formats/safetensors_test.cpp (Safetensors.Float8AgainstTorch).

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_float8_fixtures.py
(torch and safetensors). Writes tests/data/safetensors/float8_torch.safetensors: "e4m3" [256]
float8_e4m3fn and "e5m2" [256] float8_e5m2 holding the codes 0..255, and "expected.e4m3",
"expected.e5m2" [256] F32: torch's .float() of each (the conversion ComfyUI's FP8 weights go
through before their scale).
"""
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "safetensors", "float8_torch.safetensors")


def main():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    tensors = {}
    for name, dtype in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)):
        tensors[name] = codes.view(dtype).clone()
        tensors["expected." + name] = tensors[name].float()
    save_file(tensors, OUT)
    print(OUT, {k: int(v.isnan().sum()) for k, v in tensors.items() if k.startswith("expected")}, "NaN codes")


if __name__ == "__main__":
    main()
