#!/usr/bin/env python3
"""Reference values for gizml's I4 dtype (tests/tensor/test_i4.cpp reads them).

Run:  .venv/bin/python tests/reference/make_i4_fixtures.py   (writes tests/data/tensor/i4.txt)
Deterministic (fixed seed): rerunning it gives the same file.

Each line is `case dtype role values...`, the values as decimal numbers (nan, inf, -inf):
  pack   i4  values  I4 values (ml_dtypes.int4), an odd count
  pack   u8  bytes   the same packed two a byte, element 2k in the low nibble of byte k, 2k + 1
                     in the high one (numpy by hand: ml_dtypes keeps one int4 a byte)
  to_i4  T   in      values exactly representable in dtype T (made with numpy / ml_dtypes)
  to_i4  T   out     their casts to I4: numpy's rint (to nearest even), clipped to [-8, 7],
                     NaN 0: gizml's rule for I4 (docs/tensor.md). ml_dtypes' own float-to-int4
                     cast truncates toward zero and does not saturate, so it is no reference here.
  from_i4 i4 in      the 16 I4 values
  from_i4 T  out     ml_dtypes.int4 values .astype(T) (exact; bool is != 0)
"""
from pathlib import Path

import ml_dtypes
import numpy as np

OUT = Path(__file__).resolve().parents[1] / "data" / "tensor" / "i4.txt"
DTYPES = {
    "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f64": np.float64,
    "i8": np.int8, "u8": np.uint8, "i32": np.int32, "i64": np.int64, "bool": np.bool_,
}


def text(values):
    out = []
    for v in np.asarray(values, dtype=np.float64):
        if np.isnan(v):
            out.append("nan")
        elif np.isinf(v):
            out.append("inf" if v > 0 else "-inf")
        elif v == int(v):
            out.append(str(int(v)))
        else:
            out.append(repr(float(v)))
    return " ".join(out)


def main():
    rng = np.random.default_rng(26)
    lines = []
    values = rng.integers(-8, 8, size=17).astype(ml_dtypes.int4)
    nibbles = values.view(np.uint8) & 0xF  # ml_dtypes keeps an int4 in the low nibble of a byte
    padded = np.append(nibbles, np.uint8(0)) if len(nibbles) % 2 else nibbles
    packed = (padded[0::2] | (padded[1::2] << 4)).astype(np.uint8)
    lines.append(f"pack i4 values {text(values.astype(np.int64))}")
    lines.append(f"pack u8 bytes {text(packed)}")

    floats = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.49, 6.5, 7.25, 7.5, 8.0, -7.5, -8.5, -9.0,
              100.0, -1e30, np.inf, -np.inf, np.nan] + list(rng.uniform(-10, 10, size=12))
    ints = {"i8": [0, 1, -1, 7, 8, -8, -9, 127, -128], "u8": [0, 1, 7, 8, 15, 16, 255],
            "i32": [0, -8, 7, 9, -100000, 2**31 - 1, -2**31],
            "i64": [0, 5, -5, 8, -9, 2**62, -2**62], "bool": [0, 1]}
    for name, dtype in DTYPES.items():
        if name in ints:
            src = np.array(ints[name], dtype=dtype)
            expected = np.clip(src.astype(np.int64), -8, 7)
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                src = np.array(floats, dtype=np.float64).astype(dtype)
            wide = src.astype(np.float64)
            expected = np.where(np.isnan(wide), 0, np.clip(np.rint(np.nan_to_num(wide, nan=0.0)), -8, 7))
        lines.append(f"to_i4 {name} in {text(src.astype(np.float64))}")
        lines.append(f"to_i4 {name} out {text(expected)}")

    all4 = np.arange(-8, 8).astype(ml_dtypes.int4)
    lines.append(f"from_i4 i4 in {text(all4.astype(np.int64))}")
    for name, dtype in DTYPES.items():
        lines.append(f"from_i4 {name} out {text(all4.astype(dtype).astype(np.float64))}")
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
