#!/usr/bin/env python3
"""Writes the GGUF fixtures in tests/data/gguf/ (run from anywhere; deterministic).

dequant/<TYPE>.bin: random blocks of a ggml type; dequant/<TYPE>.f32: gguf.quants.dequantize of
them (Q8_K, which gguf-py does not implement, by ggml's dequantize_row_q8_K: d * q).
writer.gguf: a file from gguf.GGUFWriter with metadata of every value type and a few tensors,
each next to `expected.<name>`, its dequantization by gguf-py stored as F32.
"""
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFValueType as V

OUT = Path(__file__).resolve().parent.parent / "data" / "gguf"
rng = np.random.default_rng(20240611)

# Byte offsets of the f16 scales inside each block (everything else stays random).
HALF_SCALES = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
# Extreme finite halves: largest, smallest normal, smallest subnormal, zeros, one.
EXTREME_HALVES = [0x7BFF, 0xFBFF, 0x0400, 0x8400, 0x0001, 0x8001, 0x0000, 0x8000, 0x3C00]


def random_finite_halves(n: int) -> np.ndarray:
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    h[(h & 0x7C00) == 0x7C00] &= 0xBFFF  # exponent 31 (inf/NaN) becomes exponent 15
    k = min(n, len(EXTREME_HALVES))
    h[:k] = EXTREME_HALVES[:k]
    return h


def random_blocks(qtype: T, n_blocks: int) -> np.ndarray:
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in HALF_SCALES.get(qtype, []):
        blocks[:, off:off + 2] = random_finite_halves(n_blocks).view(np.uint8).reshape(n_blocks, 2)
    if qtype == T.Q8_K:  # f32 d: finite, some of them extreme
        d = rng.standard_normal(n_blocks).astype(np.float32) * np.float32(10.0) ** rng.integers(-30, 30, n_blocks).astype(np.float32)
        d[:4] = [np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45, 0.0]
        blocks[:, 0:4] = d.astype(np.float32).view(np.uint8).reshape(n_blocks, 4)
    if qtype == T.F16:
        blocks = random_finite_halves(n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return blocks


def reference_dequantize(blocks: np.ndarray, qtype: T) -> np.ndarray:
    if qtype == T.Q8_K:
        d = blocks[:, 0:4].copy().view(np.float32)
        q = blocks[:, 4:260].copy().view(np.int8).astype(np.float32)
        with np.errstate(over="ignore"):  # FLT_MAX * 127 is inf, as in ggml
            return (d * q).reshape(-1)
    return gguf.quants.dequantize(blocks.reshape(-1), qtype).reshape(-1)


def write_dequant_cases() -> None:
    out = OUT / "dequant"
    out.mkdir(parents=True, exist_ok=True)
    for qtype in [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
                  T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K]:
        block_size, _ = gguf.GGML_QUANT_SIZES[qtype]
        blocks = random_blocks(qtype, 2048 // block_size)
        expected = reference_dequantize(blocks, qtype).astype(np.float32, copy=False)
        assert expected.size == 2048
        (out / f"{qtype.name}.bin").write_bytes(blocks.tobytes())
        (out / f"{qtype.name}.f32").write_bytes(expected.tobytes())


def write_writer_file() -> None:
    w = gguf.GGUFWriter(OUT / "writer.gguf", arch="testarch")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", 2.718281828459045)
    w.add_bool("test.bool_true", True)
    w.add_bool("test.bool_false", False)
    w.add_string("test.string", "héllo wörld ✓")
    w.add_key_value("test.empty_string", "", V.STRING)  # add_string skips empty strings
    w.add_array("test.strings", ["a", "", "<0x0A>", "▁the"])
    w.add_array("test.ints", [1, -2, 3, 2147483647])
    w.add_key_value("test.u16s", [0, 1, 65535], V.ARRAY, sub_type=V.UINT16)
    w.add_key_value("test.i64s", [-(1 << 62), 5], V.ARRAY, sub_type=V.INT64)
    w.add_array("test.floats", [0.5, -1.25, 3.0e38])
    w.add_key_value("test.f64s", [1.0 / 3.0, -0.0], V.ARRAY, sub_type=V.FLOAT64)
    w.add_array("test.bools", [True, False, True])
    w.add_array("test.nested", [[1, 2], [3], ["x", "y"]])

    def add(name: str, values: np.ndarray, qtype: T) -> None:
        if qtype in (T.F32, T.F16):
            data = values.astype(np.float32 if qtype == T.F32 else np.float16)
            w.add_tensor(name, data)
        else:
            data = gguf.quants.quantize(values, qtype)
            w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
        w.add_tensor("expected." + name, gguf.quants.dequantize(data, qtype).astype(np.float32))

    add("f32", np.arange(6, dtype=np.float32).reshape(2, 3), T.F32)
    add("f16", rng.standard_normal((3, 32)).astype(np.float32), T.F16)
    add("bf16", rng.standard_normal((2, 8)).astype(np.float32), T.BF16)
    add("q8_0", rng.standard_normal((2, 2, 64)).astype(np.float32), T.Q8_0)
    add("q4_0", rng.standard_normal((3, 32)).astype(np.float32), T.Q4_0)
    # K-quant tensors from random blocks (gguf-py quantizes only a few formats).
    for name, qtype in [("q4_k", T.Q4_K), ("q6_k", T.Q6_K)]:
        blocks = random_blocks(qtype, 2)
        w.add_tensor(name, blocks, raw_shape=blocks.shape, raw_dtype=qtype)
        w.add_tensor("expected." + name, reference_dequantize(blocks, qtype).reshape(2, 256))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    write_dequant_cases()
    write_writer_file()
