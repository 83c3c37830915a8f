#!/usr/bin/env python3
"""Writes the safetensors fixtures in tests/data/safetensors/ with the safetensors package.

dtypes.safetensors: one small tensor of every numpy dtype safetensors takes, plus __metadata__
(safetensors.numpy.save_file); F64 comes with `expected.f64`, numpy's rounding of it to F32.
low_precision.safetensors: BF16 and all 256 codes of F8_E4M3 and F8_E5M2 (written through
safetensors.serialize_file, as numpy has no such dtypes), each with `expected.<name>`, its F32
values by ml_dtypes.
sharded/: a checkpoint in two shards with model.safetensors.index.json, as transformers writes.
"""
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import safetensors
from safetensors.numpy import save_file

OUT = Path(__file__).resolve().parent.parent / "data" / "safetensors"


def write_dtypes() -> None:
    f64 = np.array([1.0 / 3.0, -0.0, 1e300, -1e-300, 3.4028235677973366e38, np.nan, 1.5], np.float64)
    tensors = {
        "f64": f64,
        "expected.f64": f64.astype(np.float32),
        "f32": np.arange(-3, 3, dtype=np.float32).reshape(2, 3) / 4,
        "f16": np.array([[1.0, -2.5], [65504.0, 6e-8]], np.float16),
        "i64": np.array([-(1 << 62), -1, 0, 1 << 62], np.int64),
        "i32": np.array([[-2147483648], [2147483647]], np.int32),
        "i16": np.array([-32768, 0, 32767], np.int16),
        "u16": np.array([0, 65535], np.uint16),
        "u32": np.array([0, 4294967295], np.uint32),
        "u64": np.array([0, 9223372036854775807], np.uint64),
        "i8": np.array([-128, 127, 0], np.int8),
        "u8": np.arange(250, 256, dtype=np.uint8).reshape(3, 2),
        "bool": np.array([True, False, True]),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
    }
    save_file(tensors, OUT / "dtypes.safetensors", metadata={"format": "np", "note": "gizml ✓"})


def write_low_precision() -> None:
    codes = np.arange(256, dtype=np.uint8)
    bf16 = np.array([1.0, -3.140625, 1e38, 1e-40, np.inf], np.float32).astype(ml_dtypes.bfloat16)
    raw = {
        "bf16": ("bfloat16", bf16.view(np.uint8), bf16.shape, bf16.astype(np.float32)),
        "f8_e4m3": ("float8_e4m3fn", codes, (16, 16),
                    codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32).reshape(16, 16)),
        "f8_e5m2": ("float8_e5m2", codes, (256,), codes.view(ml_dtypes.float8_e5m2).astype(np.float32)),
    }
    keep = []
    specs = {}
    for name, (dtype, data, shape, expected) in raw.items():
        data = np.ascontiguousarray(data)
        expected = np.ascontiguousarray(expected)
        keep += [data, expected]
        specs[name] = safetensors.TensorSpec(dtype=dtype, shape=list(shape), data_ptr=data.ctypes.data,
                                             data_len=data.nbytes)
        specs["expected." + name] = safetensors.TensorSpec(
            dtype="float32", shape=list(expected.shape), data_ptr=expected.ctypes.data, data_len=expected.nbytes)
    safetensors.serialize_file(specs, str(OUT / "low_precision.safetensors"))


def write_sharded() -> None:
    folder = OUT / "sharded"
    folder.mkdir(parents=True, exist_ok=True)
    shards = {
        "model-00001-of-00002.safetensors": {
            "embed.weight": np.arange(12, dtype=np.float32).reshape(4, 3),
            "layers.0.weight": np.full((2, 3), 0.5, np.float16),
        },
        "model-00002-of-00002.safetensors": {
            "layers.1.weight": np.eye(3, dtype=np.float32),
            "lm_head.weight": np.array([[7, 8, 9]], np.int32),
        },
    }
    weight_map = {}
    total = 0
    for file, tensors in shards.items():
        save_file(tensors, folder / file, metadata={"format": "pt"})
        weight_map.update({name: file for name in tensors})
        total += sum(t.nbytes for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    with np.errstate(over="ignore"):  # 1e300 -> inf is part of the fixture
        write_dtypes()
    write_low_precision()
    write_sharded()
