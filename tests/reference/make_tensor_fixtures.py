#!/usr/bin/env python3
"""Golden fixtures for gizml::tensor, computed with numpy (tests/tensor/test_reference.cpp reads them).

Run:  .venv/bin/python tests/reference/make_tensor_fixtures.py   (writes tests/data/tensor/ops.bin)
The output is deterministic (fixed seed); rerunning it must give the same bytes.

File format (all integers little-endian)
----------------------------------------
  file   := "GZFX" | u32 version (= 1) | u32 case_count | case * case_count
  case   := str name | str op | u32 attr_count | attr * attr_count | u32 array_count | array * array_count
  str    := u16 byte_length | UTF-8 bytes
  attr   := str key | u32 count | i64 * count
  array  := str name | u8 dtype | u8 ndim | i64 shape[ndim] | u64 byte_count | raw data
  dtype  := 0 F32, 1 F16, 2 BF16, 3 I8, 4 U8, 5 I32, 6 I64, 7 Bool  (gizml::DType's order)
            8 F64 (fixture only: exact references and tolerance scales)
  Raw data is the contiguous row-major array; BF16 is the upper 16 bits of the f32 pattern,
  Bool one byte 0/1.

Arrays of a case: inputs ("x"; "a", "b"; "c", "a", "b" for where; "t0", "t1", ... for concat and
stack; "x", "idx" for gather and indexSelect), then "out" (the expected result) and, for
tolerance cases, "scale" (F64, see below).

Attributes:
  mode      [0|1|2]  0: exact (bit-equal, any NaN equals any NaN); "out" has the result dtype.
                     1: ulp: "out" is the correctly rounded value in the result dtype; the test
                        bounds the distance in ulps of that dtype (its table, per op). gelutanh
                        adds "cond" (F64): |x f'(x) / f(x)| at each input, which the test adds
                        to the bound (in f32 ulps: gizml rounds the inner cubic u in f32).
                     2: sum-like: "out" is the exact result (F64); |got - out| must be within
                        scale * (terms + c_op) * 2^-24 (+ one ulp of the result dtype if it is
                        F16/BF16), c_op from the test. scale per element: sum |x| (sum),
                        mean |x| (mean), the variance (var), |prod| (prod), sum_k |a_ik b_kj|
                        (matmul), the running sum of |x| (cumsum), |y| (1 + |x - max| / n)
                        (softmax: x - max is rounded in f32), |x - max| + |log sum| + 1
                        (logsoftmax).
  rdtype    [code]   the dtype gizml must return
  terms     [n]      mode 2: the number of terms added per element
  axes      [...]    reductions (empty = all axes)
  keepdim   [0|1]
  axis      [k]      argmax/argmin/softmax/logsoftmax/cumsum/concat/stack/gather/indexselect
  ddof      [k]      variance
  dtype     [code]   cast target
  view.NAME [...]    a view to take of input NAME before the op: a sequence of steps
                     [kind, argc, args...], kinds 1 transpose(a, b), 2 slice(axis, start, stop,
                     step) with Python slice semantics, 3 expand(shape...), 4 permute(axes...).

ops: unary.<neg|abs|exp|log|sqrt|rsqrt|sin|cos|tanh|sigmoid|relu|silu|gelu|gelutanh|floor|ceil|
round|sign>, binary.<add|sub|mul|div|pow|min|max|mod|eq|ne|lt|le|gt|ge>, where, cast,
reduce.<sum|mean|max|min|prod|var>, argmax, argmin, softmax, logsoftmax, cumsum, matmul, concat,
stack, gather, indexselect.

gizml's rules that the expected values follow (src/tensor/lazy.cpp, src/core/dtype.cpp): binary
operands are cast to the promoted compute type first and the operation runs in it (f32 for the
float types, rounded to F16/BF16 after each op; wrapping int64 for the integers); integer true
division gives F32; an int with a float gives the float; F16 with BF16 gives F32; U8 with I8 gives
I32; bools in arithmetic count as I64; float-only unary ops (exp, ...) of integers give F32; sums,
prods and cumsums of ints give I64; mean/variance of ints give F32; float->int casts truncate
toward zero and saturate, NaN -> 0; int->narrower int wraps; anything->Bool is != 0; relu(x) is
(x < 0 ? 0 : x); sign(+-0) is +0 and sign(NaN) NaN.
"""
import math
import os
import struct
import sys

import numpy as np

F32, F16, BF16, I8, U8, I32, I64, BOOL, F64 = range(9)
NAMES = ["F32", "F16", "BF16", "I8", "U8", "I32", "I64", "Bool", "F64"]
FLOATS = (F32, F16, BF16)
INTS = (I8, U8, I32, I64)
ALL = (F32, F16, BF16, I8, U8, I32, I64, BOOL)
NP_INT = {I8: np.int8, U8: np.uint8, I32: np.int32, I64: np.int64}
INT_BITS = {I8: 8, U8: 8, I32: 32, I64: 64}
INT_RANGE = {t: (int(np.iinfo(NP_INT[t]).min), int(np.iinfo(NP_INT[t]).max)) for t in INTS}

rng = np.random.default_rng(20240611)
np.seterr(all="ignore")

# ---------------------------------------------------------------------------------------------
# dtype helpers. Values of each dtype live in numpy as: F32 float32, F16 float16, BF16 float32
# holding bf16-exact values, ints their numpy type, Bool np.bool_, F64 float64.


def bf16_bits_from_f32(x):
    """float32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    r = np.where(nan, ((u >> 16) | 0x40) & 0xFFFF, r)
    return r.astype(np.uint16)


def bf16_from_bits(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16_f32(x):
    """float32 values -> nearest-even bf16 values (as float32)."""
    return bf16_from_bits(bf16_bits_from_f32(x))


def round_bf16_f64(x):
    """float64 values -> nearest-even bf16 values (as float32), by rounding the f64 bit pattern
    at bf16's 8 significant bits (one rounding: no double rounding through f32)."""
    x = np.asarray(x, dtype=np.float64)
    u = np.ascontiguousarray(x).view(np.uint64)
    drop = np.uint64(45)  # 52 - 7 mantissa bits
    half = np.uint64((1 << 44) - 1)
    r = (u + half + ((u >> drop) & np.uint64(1))) & ~np.uint64((1 << 45) - 1)
    y = r.view(np.float64)
    # bf16's subnormals (below 2^-126) are multiples of 2^-133: round to nearest even multiple.
    tiny = np.abs(x) < 2.0 ** -126
    y = np.where(tiny, np.rint(x * 2.0 ** 133) * 2.0 ** -133, y)
    y = np.where(np.isfinite(x), y, x)
    with np.errstate(over="ignore"):
        return y.astype(np.float32)  # exact unless beyond f32's range (-> inf)


def round_int_bits(v, p):
    """The integer v rounded to p significant bits, nearest even (exact Python int)."""
    if v == 0:
        return 0
    s, a = (1, v) if v > 0 else (-1, -v)
    n = a.bit_length()
    if n <= p:
        return v
    shift = n - p
    q, r = divmod(a, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return s * (q << shift)


def ints_to_float(values, dst):
    """Exact integers -> dst with one correct rounding."""
    out = []
    for v in values:
        v = int(v)
        if dst == F32:
            out.append(float(round_int_bits(v, 24)))
        elif dst == BF16:
            out.append(float(round_int_bits(v, 8)))
        else:  # F16: 11 bits, overflow beyond 65504
            r = round_int_bits(v, 11)
            out.append(math.copysign(math.inf, r) if abs(r) > 65504 else float(r))
    a = np.array(out, dtype=np.float64)
    return a.astype(np.float16) if dst == F16 else a.astype(np.float32)


def as_np(code, values):
    """Builds an array of dtype code from Python/float64 values that it holds exactly."""
    if code == F32:
        return np.asarray(values, dtype=np.float32)
    if code == F16:
        return np.asarray(values, dtype=np.float16)
    if code == BF16:
        return round_bf16_f64(np.asarray(values, dtype=np.float64))
    if code == BOOL:
        return np.asarray(values, dtype=np.bool_)
    if code == F64:
        return np.asarray(values, dtype=np.float64)
    return np.asarray(values, dtype=NP_INT[code])


def to_f32(code, x):
    """Float values widened exactly to float32 (bools to 0/1)."""
    return np.asarray(x).astype(np.float32)


def round_f32_to(code, x):
    """float32 values -> float dtype code (one RNE rounding)."""
    x = np.asarray(x, dtype=np.float32)
    if code == F32:
        return x
    if code == F16:
        return x.astype(np.float16)
    if code == BF16:
        return round_bf16_f32(x)
    raise ValueError(code)


def round_f64_to(code, x):
    """float64 values -> float dtype code (one RNE rounding)."""
    x = np.asarray(x, dtype=np.float64)
    if code == F32:
        return x.astype(np.float32)
    if code == F16:
        return x.astype(np.float16)
    if code == BF16:
        return round_bf16_f64(x)
    raise ValueError(code)


def cast(x, src, dst):
    """gizml's cast of values x (dtype src) to dst."""
    x = np.asarray(x)
    if src == dst:
        return x.copy()
    if dst == BOOL:
        return (x != 0) if src != BOOL else x.copy()  # NaN != 0 is True
    if dst in FLOATS:
        if src in FLOATS:
            return round_f32_to(dst, to_f32(src, x))
        return ints_to_float(x.reshape(-1).astype(np.int64).tolist(), dst).reshape(x.shape)
    # dst is an integer type
    lo, hi = INT_RANGE[dst]
    if src == BOOL:
        return x.astype(NP_INT[dst])
    if src in FLOATS:
        f = x.astype(np.float64).reshape(-1)
        out = []
        for v in f:
            if math.isnan(v):
                out.append(0)
            elif v <= lo:
                out.append(lo)
            elif v >= hi:
                out.append(hi)
            else:
                out.append(max(lo, min(hi, int(math.trunc(v)))))
        return np.array(out, dtype=NP_INT[dst]).reshape(x.shape)
    # int -> int wraps (two's complement)
    vals = [wrap_int(int(v), dst) for v in x.reshape(-1).tolist()]
    return np.array(vals, dtype=NP_INT[dst]).reshape(x.shape)


def wrap_int(v, code):
    bits = INT_BITS[code]
    v &= (1 << bits) - 1
    if code != U8 and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def promote(a, b):
    """src/core/dtype.cpp promoteTypes."""
    if a == b:
        return a
    if a == BOOL:
        return b
    if b == BOOL:
        return a
    if a in FLOATS and b in FLOATS:
        ra, rb = (3 if a == F32 else 2), (3 if b == F32 else 2)
        return (a if ra > rb else b) if ra != rb else F32
    if a in FLOATS:
        return a
    if b in FLOATS:
        return b
    if {a, b} == {U8, I8}:
        return I32
    return a if INT_BITS[a] >= INT_BITS[b] else b


COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")


def binary_compute_type(op, a, b):
    t = promote(a, b)
    if t == BOOL and op not in COMPARISONS:
        t = I64
    if op == "div" and t not in FLOATS:
        t = F32
    return t


FLOAT_ONLY = ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "silu", "gelu", "gelutanh")


def unary_result_type(op, t):
    if op in FLOAT_ONLY and t not in FLOATS:
        return F32
    if t == BOOL:
        return I64
    return t


# ---------------------------------------------------------------------------------------------
# Views: the recipes both sides apply.

def v_transpose(a, b):
    return [1, 2, a, b]


def v_slice(axis, start, stop, step=1):
    return [2, 4, axis, start, stop, step]


def v_expand(*shape):
    return [3, len(shape)] + list(shape)


def v_permute(*axes):
    return [4, len(axes)] + list(axes)


def apply_view(x, recipe):
    i = 0
    while i < len(recipe):
        kind, argc = recipe[i], recipe[i + 1]
        args = recipe[i + 2:i + 2 + argc]
        i += 2 + argc
        if kind == 1:
            x = np.swapaxes(x, args[0], args[1])
        elif kind == 2:
            axis, start, stop, step = args
            idx = [slice(None)] * x.ndim
            idx[axis] = slice(start, stop, step)
            x = x[tuple(idx)]
        elif kind == 3:
            x = np.broadcast_to(x, tuple(args))
        elif kind == 4:
            x = np.transpose(x, args)
        else:
            raise ValueError(kind)
    return x


# ---------------------------------------------------------------------------------------------
# Writing.

cases = []
names_seen = set()


class Input:
    def __init__(self, code, base, view=None):
        self.code, self.base, self.view = code, as_np(code, base) if not isinstance(base, np.ndarray) else base, view
        self.value = apply_view(self.base, view) if view else self.base


def add_case(name, op, inputs, out_code, out, mode=0, rdtype=None, scale=None, terms=None, cond=None, **attrs):
    assert name not in names_seen, name
    names_seen.add(name)
    arrays = []
    all_attrs = {"mode": [mode], "rdtype": [out_code if rdtype is None else rdtype]}
    for key, inp in inputs.items():
        arrays.append((key, inp.code, inp.base))
        if inp.view:
            all_attrs["view." + key] = list(inp.view)
    arrays.append(("out", out_code, np.asarray(out)))
    if cond is not None:
        arrays.append(("cond", F64, np.asarray(cond, dtype=np.float64)))
    if mode == 2:
        arrays.append(("scale", F64, np.asarray(scale, dtype=np.float64)))
        all_attrs["terms"] = [int(terms)]
    for k, v in attrs.items():
        all_attrs[k] = [int(e) for e in (v if isinstance(v, (list, tuple)) else [v])]
    cases.append((name, op, all_attrs, arrays))


def enc_str(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def enc_array(name, code, arr):
    arr = np.asarray(arr)
    if code == BF16:
        data = bf16_bits_from_f32(arr.astype(np.float32)).tobytes()
    else:
        want = {F32: np.float32, F16: np.float16, BOOL: np.uint8, F64: np.float64}.get(code) or NP_INT[code]
        data = np.ascontiguousarray(arr.astype(want)).astype(np.dtype(want).newbyteorder("<")).tobytes()
    out = enc_str(name) + struct.pack("<BB", code, arr.ndim)
    out += b"".join(struct.pack("<q", d) for d in arr.shape)
    return out + struct.pack("<Q", len(data)) + data


def test_name(name):
    """The GoogleTest name the C++ side derives from a case name ('-' -> 'm', others -> '_')."""
    return "".join(ch if ch.isalnum() else "m" if ch == "-" else "_" for ch in name)


def encode_cases(case_list):
    """The bytes of a GZFX file holding (name, op, attrs, arrays) cases (format above)."""
    blob = bytearray(b"GZFX" + struct.pack("<II", 1, len(case_list)))
    for name, op, attrs, arrays in case_list:
        blob += enc_str(name) + enc_str(op) + struct.pack("<I", len(attrs))
        for k, v in attrs.items():
            blob += enc_str(k) + struct.pack("<I", len(v)) + b"".join(struct.pack("<q", int(e)) for e in v)
        blob += struct.pack("<I", len(arrays))
        for aname, code, arr in arrays:
            blob += enc_array(aname, code, arr)
    return bytes(blob)


def write_cases(path, case_list):
    blob = encode_cases(case_list)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(blob)
    return len(blob)


def write(path):
    assert len({test_name(c[0]) for c in cases}) == len(cases), "case names collide as test names"
    return write_cases(path, cases)


# ---------------------------------------------------------------------------------------------
# Input data.

def randn(shape, code=F32, scale=1.0, loc=0.0):
    v = rng.standard_normal(shape) * scale + loc
    return Input(code, round_f64_to(code, v) if code in FLOATS else v)


def rand_ints(shape, code, lo=None, hi=None):
    lo = INT_RANGE[code][0] if lo is None else lo
    hi = INT_RANGE[code][1] if hi is None else hi
    return Input(code, rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(NP_INT[code]))


def rand_bools(shape):
    return Input(BOOL, rng.random(shape) < 0.5)


def with_edges(values, edges):
    """Replaces the first len(edges) entries of a flat float64 array by edges."""
    v = np.array(values, dtype=np.float64).reshape(-1)
    v[:len(edges)] = edges
    return v


# ---------------------------------------------------------------------------------------------
# Unary ops.

SQRT1_2 = 1.0 / math.sqrt(2.0)
erfc_v = np.vectorize(math.erfc, otypes=[np.float64])


def sigmoid64(x):
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-x)), np.exp(x) / (1.0 + np.exp(x)))


# gelu without cancellation in the negative tail (even f64 loses 1 + erf(z) there):
# 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2), 0.5 x (1 + tanh(u)) = x sigmoid(2u).
K_TANH = math.sqrt(2.0 / math.pi)


def gelu64(x):
    return 0.5 * x * erfc_v(-x * SQRT1_2) if x.size else x


def gelu_tanh64(x):
    u = K_TANH * (x + 0.044715 * x ** 3)
    return x * sigmoid64(2.0 * u)


def gelu_tanh_cond(x):
    """|x f'(x) / f(x)| of the tanh form: 1 + 2 x u'(x) (1 - sigmoid(2u))."""
    u = K_TANH * (x + 0.044715 * x ** 3)
    du = K_TANH * (1.0 + 3 * 0.044715 * x * x)
    with np.errstate(all="ignore"):
        c = np.abs(1.0 + 2.0 * x * du * (1.0 - sigmoid64(2.0 * u)))
    return np.where(np.isfinite(c), c, 0.0)


# Ops that round an inner argument (the cubic u) in f32 before a function that amplifies
# relative errors: their ulp allowance grows by the condition number |x f'(x) / f(x)|.
# (gizml's erf gelu evaluates erfc in f64, so it needs none.)
CONDITION = {"gelutanh": gelu_tanh_cond}


UNARY64 = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "sigmoid": sigmoid64,
    "silu": lambda x: x * sigmoid64(x), "gelu": gelu64, "gelutanh": gelu_tanh64,
}
EXACT_FLOAT = {
    "neg": np.negative, "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": np.rint,
    "relu": lambda x: np.where(x < 0, np.zeros_like(x), x),
    "sign": lambda x: np.where(np.isnan(x), x, np.sign(x) + 0.0),  # sign(-0) = +0
    "sqrt": np.sqrt,
}

NAN, INF = math.nan, math.inf
COMMON_EDGES = [0.0, -0.0, NAN, INF, -INF, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-40, -1e-40, 3e38, -3e38]
# Inputs per op: a generator of the bulk plus edges where numpy defines the result.
UNARY_INPUTS = {
    "neg": (lambda n: rng.standard_normal(n) * 10, COMMON_EDGES),
    "abs": (lambda n: rng.standard_normal(n) * 10, COMMON_EDGES),
    "floor": (lambda n: rng.standard_normal(n) * 20, COMMON_EDGES + [8388607.5, -8388607.5, 1e10]),
    "ceil": (lambda n: rng.standard_normal(n) * 20, COMMON_EDGES + [8388607.5, -8388607.5, 1e10]),
    "round": (lambda n: np.round(rng.standard_normal(n) * 20 * 2) / 2,  # many exact ties
              COMMON_EDGES + [3.5, 4.5, -3.5, -4.5, 8388607.5, -8388607.5, 0.49999997, 1e10]),
    "sign": (lambda n: rng.standard_normal(n) * 10, COMMON_EDGES),
    "relu": (lambda n: rng.standard_normal(n) * 10, COMMON_EDGES),
    "sqrt": (lambda n: np.abs(rng.standard_normal(n)) * 100, [0.0, -0.0, -1.0, NAN, INF, -INF, 1e-40, 2.0, 3e38]),
    "rsqrt": (lambda n: np.abs(rng.standard_normal(n)) * 100 + 1e-3, [0.0, -0.0, -1.0, NAN, INF, 1e-30, 4.0, 3e38]),
    "exp": (lambda n: rng.uniform(-87, 88, n), [0.0, -0.0, NAN, INF, -INF, 88.7, -87.3, 100.0, -100.0, 1e-8]),
    "log": (lambda n: np.exp(rng.uniform(-80, 80, n)),
            [0.0, -0.0, -1.0, NAN, INF, -INF, 1.0, 1e-40, 1e-45, 3e38, 1.0000001, 0.99999994]),
    "sin": (lambda n: np.concatenate([rng.uniform(-10, 10, n - n // 4), rng.uniform(-3e4, 3e4, n // 4)]),
            [0.0, -0.0, NAN, INF, -INF, 1e-30, 3.1415927, 1e5, -1e5, 4e4]),
    "cos": (lambda n: np.concatenate([rng.uniform(-10, 10, n - n // 4), rng.uniform(-3e4, 3e4, n // 4)]),
            [0.0, -0.0, NAN, INF, -INF, 1e-30, 1.5707964, 1e5, -1e5, 4e4]),
    "tanh": (lambda n: rng.standard_normal(n) * 4, [0.0, -0.0, NAN, INF, -INF, 1e-30, 20.0, -20.0, 9.0, 0.1]),
    "sigmoid": (lambda n: rng.standard_normal(n) * 10, [0.0, -0.0, NAN, INF, -INF, 80.0, -80.0, 17.0, -17.0, 1e-30]),
    "silu": (lambda n: rng.standard_normal(n) * 10, [0.0, -0.0, NAN, INF, 80.0, -80.0, 1e-30]),
    "gelu": (lambda n: rng.standard_normal(n) * 4, [0.0, -0.0, NAN, INF, 10.0, -10.0, 1e-30, -5.0]),
    "gelutanh": (lambda n: rng.standard_normal(n) * 4, [0.0, -0.0, NAN, INF, 10.0, -10.0, 1e-30, -5.0]),
}
UNARY_ORDER = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
               "silu", "gelu", "gelutanh", "floor", "ceil", "round", "sign"]


def unary_cond(op, code, x):
    """The condition array of a mode-1 unary case, or None."""
    if op not in CONDITION:
        return None
    xf = to_f32(code, cast(x, code, F32) if code not in FLOATS else x).astype(np.float64)
    return CONDITION[op](xf)


def expected_unary(op, code, x):
    """gizml's unary op of values x (dtype code): (result dtype, expected values, mode)."""
    r = unary_result_type(op, code)
    if r in FLOATS:
        xf = to_f32(code, cast(x, code, r) if code not in FLOATS else x)
        if op in EXACT_FLOAT:
            # Exact in f32, then one rounding (double rounding is innocuous for sqrt: 24 >= 2p+2).
            with np.errstate(all="ignore"):
                y = EXACT_FLOAT[op](xf.astype(np.float32))
            return r, round_f32_to(r, y.astype(np.float32)), 0
        with np.errstate(all="ignore"):
            y = UNARY64[op](xf.astype(np.float64))
        return r, round_f64_to(r, y), 1
    # Integer results.
    xi = x.astype(np.int64) if code != BOOL else x.astype(np.int64)
    fn = {"neg": lambda v: -v, "abs": abs, "relu": lambda v: max(v, 0), "sign": lambda v: (v > 0) - (v < 0),
          "floor": lambda v: v, "ceil": lambda v: v, "round": lambda v: v}[op]
    vals = [wrap_int(fn(int(v)), r) for v in xi.reshape(-1).tolist()]
    return r, as_np(r, vals).reshape(x.shape), 0


def unary_cases():
    for op in UNARY_ORDER:
        gen, edges = UNARY_INPUTS[op]
        for code, n in ((F32, 1023), (F16, 33), (BF16, 33)):
            vals = with_edges(gen(n), edges)
            x = Input(code, round_f64_to(code, vals))
            r, out, mode = expected_unary(op, code, x.value)
            add_case(f"unary.{op}.{NAMES[code]}.{n}", "unary." + op, {"x": x}, r, out, mode,
                     cond=unary_cond(op, code, x.value))
        # A non-contiguous view: the transpose of [7, 11] (odd shape), F32.
        base = round_f64_to(F32, gen(77).reshape(7, 11))
        x = Input(F32, base, v_transpose(0, 1))
        r, out, mode = expected_unary(op, F32, x.value)
        add_case(f"unary.{op}.F32.transposed", "unary." + op, {"x": x}, r, out, mode,
                 cond=unary_cond(op, F32, x.value))
    # Integer and bool inputs where the op allows.
    for op in ("neg", "abs", "relu", "sign", "floor", "ceil", "round"):
        for code in INTS:
            x = rand_ints((33,), code)
            lo, hi = INT_RANGE[code]
            x.base[:3] = [lo, hi, 0]
            x.value = x.base
            r, out, mode = expected_unary(op, code, x.value)
            add_case(f"unary.{op}.{NAMES[code]}", "unary." + op, {"x": x}, r, out, mode)
    for op in ("neg", "abs"):
        x = rand_bools((7,))
        r, out, mode = expected_unary(op, BOOL, x.value)
        add_case(f"unary.{op}.Bool", "unary." + op, {"x": x}, r, out, mode)
    for op in ("exp", "sqrt", "sin", "sigmoid"):
        x = rand_ints((33,), I32, -20, 20) if op != "sqrt" else rand_ints((33,), I32, 0, 1 << 30)
        r, out, mode = expected_unary(op, I32, x.value)
        add_case(f"unary.{op}.I32", "unary." + op, {"x": x}, r, out, mode)
    # Strided slice with a negative step, and an expanded (stride 0) input.
    x = Input(F32, round_f64_to(F32, rng.standard_normal((9, 33)) * 3), v_slice(1, -1, -34, -3) + v_slice(0, 1, 9, 2))
    r, out, mode = expected_unary("exp", F32, x.value)
    add_case("unary.exp.F32.stepslice", "unary.exp", {"x": x}, r, out, mode)
    x = Input(F32, round_f64_to(F32, rng.standard_normal((1, 7)) * 3), v_expand(5, 7))
    r, out, mode = expected_unary("tanh", F32, x.value)
    add_case("unary.tanh.F32.expand", "unary.tanh", {"x": x}, r, out, mode)
    x = Input(F16, round_f64_to(F16, rng.standard_normal((4, 1, 3)) * 3), v_expand(2, 4, 5, 3) + v_permute(3, 1, 0, 2))
    r, out, mode = expected_unary("abs", F16, x.value)
    add_case("unary.abs.F16.expand_permute", "unary.abs", {"x": x}, r, out, mode)


# ---------------------------------------------------------------------------------------------
# Binary ops.

def float_binary(op, a, b):
    """op on float32 arrays, in float32 (exact IEEE ops) or float64 (pow), as gizml computes."""
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / b
    if op == "min":
        return np.minimum(a, b)
    if op == "max":
        return np.maximum(a, b)
    if op == "mod":
        return np.remainder(a, b)
    if op == "pow":
        return np.power(a.astype(np.float64), b.astype(np.float64))
    return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}[op](a, b)


def int_binary(op, a, b, t):
    """op on exact integers (Python ints) wrapped to t."""
    if op in COMPARISONS:
        return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[op]
    if op == "add":
        v = a + b
    elif op == "sub":
        v = a - b
    elif op == "mul":
        v = a * b
    elif op == "min":
        v = min(a, b)
    elif op == "max":
        v = max(a, b)
    elif op == "mod":
        v = 0 if b == 0 else a - b * (a // b)  # Python's floor mod; x % 0 = 0
    elif op == "pow":
        assert b >= 0
        v = pow(a, b, 1 << 64)
    else:
        raise ValueError(op)
    return wrap_int(wrap_int(v, I64), t)


def expected_binary(op, ca, a, cb, b):
    t = binary_compute_type(op, ca, cb)
    r = BOOL if op in COMPARISONS else t
    shape = np.broadcast_shapes(a.shape, b.shape)
    a2 = np.broadcast_to(cast(a, ca, t), shape)
    b2 = np.broadcast_to(cast(b, cb, t), shape)
    if t in FLOATS or t == BOOL:
        af, bf = to_f32(t, a2), to_f32(t, b2)
        with np.errstate(all="ignore"):
            y = float_binary(op, af, bf)
        if op in COMPARISONS:
            return r, y.astype(np.bool_), 0
        if op == "pow":
            return r, round_f64_to(r, y), 1
        return r, round_f32_to(r, y.astype(np.float32)), 0
    av = a2.astype(np.int64).reshape(-1).tolist()
    bv = b2.astype(np.int64).reshape(-1).tolist()
    vals = [int_binary(op, x, y, t) for x, y in zip(av, bv)]
    return r, as_np(r, vals).reshape(shape), 0


BINARY_ORDER = ["add", "sub", "mul", "div", "pow", "min", "max", "mod", "eq", "ne", "lt", "le", "gt", "ge"]
FLOAT_PAIR_EDGES = [  # (a, b) pairs put at the front of float inputs
    (NAN, 1.0), (1.0, NAN), (INF, 1.0), (-INF, INF), (INF, INF), (0.0, -0.0), (-0.0, 0.0), (0.0, 0.0),
    (1.0, 0.0), (-1.0, 0.0), (5.0, -3.0), (-5.0, 3.0), (5.5, 2.0), (-1.0, INF), (1.0, -INF), (2.0, 2.0),
    (-8.0, 1.0 / 3.0), (0.0, -1.0), (NAN, 0.0), (1.0, 1e30), (3e38, 3e38), (1e-40, 0.5),
]


def binary_float_inputs(op, code, n):
    if op == "pow":
        a = np.abs(rng.standard_normal(n)) * 3
        b = rng.standard_normal(n) * 3
        a[: n // 4] = np.round(rng.standard_normal(n // 4) * 4)  # negative bases with integer powers
        b[: n // 4] = np.round(rng.standard_normal(n // 4) * 3)
    elif op == "mod":
        a = rng.standard_normal(n) * 20
        b = rng.standard_normal(n) * 5
    else:
        a = rng.standard_normal(n) * 10
        b = rng.standard_normal(n) * 10
        if op in COMPARISONS or op in ("min", "max"):
            b[::3] = a[::3]  # equal pairs
    k = min(n, len(FLOAT_PAIR_EDGES))
    a[:k] = [p[0] for p in FLOAT_PAIR_EDGES[:k]]
    b[:k] = [p[1] for p in FLOAT_PAIR_EDGES[:k]]
    return Input(code, round_f64_to(code, a)), Input(code, round_f64_to(code, b))


def add_binary(name, op, a, b):
    r, out, mode = expected_binary(op, a.code, a.value, b.code, b.value)
    add_case(name, "binary." + op, {"a": a, "b": b}, r, out, mode)


def binary_cases():
    for op in BINARY_ORDER:
        for code, n in ((F32, 1023), (F16, 33), (BF16, 33)):
            a, b = binary_float_inputs(op, code, n)
            add_binary(f"binary.{op}.{NAMES[code]}.{n}", op, a, b)
        # Integers (no true division here: that one is below).
        for code in INTS:
            if op == "div":
                continue
            if op == "pow":
                a = rand_ints((33,), code, *((-5, 5) if code != U8 else (0, 9)))
                b = rand_ints((33,), code, 0, 40)
            else:
                a, b = rand_ints((33,), code), rand_ints((33,), code)
                if op == "mod":
                    b.base[:4] = [0, -1 if code != U8 else 1, 3, 7]
                    a.base[:4] = [5, INT_RANGE[code][0], INT_RANGE[code][0], -9 if code != U8 else 9]
                if op in COMPARISONS or op in ("min", "max"):
                    b.base[::3] = a.base[::3]
            add_binary(f"binary.{op}.{NAMES[code]}", op, a, b)
    # Broadcasting, odd shapes, views.
    for op in ("add", "mul", "sub", "div", "max", "lt", "mod"):
        a = randn((4, 1, 7))
        b = randn((3, 1))
        add_binary(f"binary.{op}.bcast.4x1x7_3x1", op, a, b)
    add_binary("binary.add.bcast.scalar_33", "add", randn(()), randn((33,)))
    add_binary("binary.mul.bcast.1_1023", "mul", randn((1,)), randn((1023,)))
    add_binary("binary.sub.bcast.33x1_1x33", "sub", randn((33, 1)), randn((1, 33)))
    a = Input(F32, round_f64_to(F32, rng.standard_normal((33, 7))), v_transpose(0, 1))
    add_binary("binary.add.transposed_plus_rowvec", "add", a, randn((33,)))
    a = Input(F32, round_f64_to(F32, rng.standard_normal((7, 69))), v_slice(1, 3, 69, 2))
    b = Input(F32, round_f64_to(F32, rng.standard_normal((66, 7))), v_slice(0, -1, -67, -2) + v_transpose(0, 1))
    add_binary("binary.mul.stepslice_views", "mul", a, b)
    a = Input(F32, round_f64_to(F32, rng.standard_normal((5, 1))), v_expand(5, 9))
    add_binary("binary.div.expand_view", "div", a, randn((9,)))
    # Type promotion.
    add_binary("binary.add.I32_F32", "add", rand_ints((33,), I32, -(1 << 26), 1 << 26), randn((33,)))
    add_binary("binary.mul.U8_I8", "mul", rand_ints((33,), U8), rand_ints((33,), I8))
    add_binary("binary.add.F16_BF16", "add", randn((33,), F16), randn((33,), BF16))
    add_binary("binary.add.Bool_Bool", "add", rand_bools((33,)), rand_bools((33,)))
    add_binary("binary.mul.Bool_I8", "mul", rand_bools((33,)), rand_ints((33,), I8))
    add_binary("binary.sub.I8_I64", "sub", rand_ints((7, 1), I8), rand_ints((5,), I64))
    add_binary("binary.add.I64_F16", "add", rand_ints((33,), I64, -70000, 70000), randn((33,), F16))
    add_binary("binary.add.U8_BF16", "add", rand_ints((33,), U8), randn((33,), BF16, 100))
    a, b = rand_ints((33,), I32), rand_ints((33,), I32, -50, 50)
    b.base[:3] = [0, 0, 0]
    a.base[:3] = [1, -1, 0]
    add_binary("binary.div.I32_I32", "div", a, b)
    add_binary("binary.div.U8_I8", "div", rand_ints((33,), U8), rand_ints((33,), I8, 1, 127))
    add_binary("binary.div.Bool_I64", "div", rand_bools((7,)), rand_ints((7,), I64, 1, 9))
    add_binary("binary.lt.I32_F32", "lt", rand_ints((33,), I32, -(1 << 30), 1 << 30), randn((33,), F32, 1e9))
    add_binary("binary.eq.I64_U8", "eq", rand_ints((33,), I64, 0, 4), rand_ints((33,), U8, 0, 4))
    add_binary("binary.ge.Bool_Bool", "ge", rand_bools((33,)), rand_bools((33,)))
    add_binary("binary.max.F16_I8", "max", randn((33,), F16, 100), rand_ints((33,), I8))
    add_binary("binary.mod.I8_F32", "mod", rand_ints((33,), I8), randn((33,), F32, 5))
    add_binary("binary.pow.F32_I32", "pow", randn((33,), F32, 2), rand_ints((33,), I32, -3, 6))


# ---------------------------------------------------------------------------------------------
# where and casts.

def expected_where(c, cc, a, ca, b, cb):
    t = promote(ca, cb)
    shape = np.broadcast_shapes(c.shape, a.shape, b.shape)
    cond = np.broadcast_to(cast(c, cc, BOOL), shape)
    av = np.broadcast_to(cast(a, ca, t), shape)
    bv = np.broadcast_to(cast(b, cb, t), shape)
    return t, np.where(cond, av, bv)


def add_where(name, c, a, b):
    t, out = expected_where(c.value, c.code, a.value, a.code, b.value, b.code)
    add_case(name, "where", {"c": c, "a": a, "b": b}, t, out, 0)


def where_cases():
    c = rand_bools((1023,))
    a, b = randn((1023,)), randn((1023,))
    a.base[:3] = [NAN, -0.0, INF]
    add_where("where.F32.1023", c, a, b)
    add_where("where.bcast.F16", rand_bools((4, 1)), randn((1, 7), F16), randn((7,), F16))
    add_where("where.mixed.I8_F16", rand_bools((33,)), rand_ints((33,), I8), randn((33,), F16))
    add_where("where.mixed.U8_I8", rand_bools((33,)), rand_ints((33,), U8), rand_ints((33,), I8))
    add_where("where.mixed.F16_BF16", rand_bools((33,)), randn((33,), F16), randn((33,), BF16))
    add_where("where.I64.cond_I32", rand_ints((33,), I32, -2, 2), rand_ints((33,), I64), rand_ints((33,), I64))
    add_where("where.cond_F32", randn((7, 5)), rand_ints((7, 5), I32), randn((7, 5)))
    add_where("where.Bool", rand_bools((33,)), rand_bools((33,)), rand_bools((33,)))
    c = Input(BOOL, rng.random((7, 5)) < 0.5, v_transpose(0, 1))
    a = Input(F32, round_f64_to(F32, rng.standard_normal((1, 7))), v_expand(5, 7))
    b = Input(F32, round_f64_to(F32, rng.standard_normal((5, 14))), v_slice(1, 0, 14, 2))
    add_where("where.views", c, a, b)


CAST_FLOAT_EDGES = [
    0.0, -0.0, NAN, INF, -INF, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 0.9999999, -0.9999999,
    127.0, 127.5, 127.99, 128.0, -128.0, -128.5, -129.0, 255.0, 255.5, 256.0, -1.0, 300.7, -300.7,
    2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 3e9, -3e9,
    9.2233715e18, 9.223372e18, -9.223372e18, -9.2233725e18, 1e19, -1e19, 3e38, -3e38,
    1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -9, 1 + 2 ** -12,
    65504.0, 65519.0, 65520.0, 70000.0, -65520.0, 2 ** -24, 2 ** -25, 3 * 2 ** -25, 2 ** -26, 2 ** -14,
    2 ** -14 - 2 ** -25, 6e-8, 1e-40, -1e-40, 1.17549435e-38, 3.3895314e38, 3.3961775e38, 3.4e38,
    16777217.0, 33554436.0,
]
CAST_INT_EDGES = [0, 1, -1, 127, 128, -128, -129, 255, 256, 257, -255, 2047, 2049, 4097, 65504, 65519, 65520,
                  65535, 65536, 70000, 16777217, 16842753, 16908289, 2 ** 24 + 2 ** 16, 2 ** 24 + 3 * 2 ** 16,
                  2147483647, -2147483648, 2 ** 31, 2 ** 32 + 5, 2 ** 53 + 1, 2 ** 62 + 2 ** 38 + 1,
                  2 ** 63 - 1, -2 ** 63, -(2 ** 40) - 3]


def cast_source(code):
    """Values of code for cast tests: edges plus random ones."""
    if code in FLOATS:
        bulk = rng.standard_normal(40) * rng.choice([1.0, 300.0, 1e5, 1e10], 40)
        vals = round_f64_to(code, np.concatenate([np.array(CAST_FLOAT_EDGES), bulk]))
        return Input(code, vals)
    if code == BOOL:
        return Input(BOOL, np.array([True, False, True, True, False, False, True]))
    lo, hi = INT_RANGE[code]
    edges = [e for e in CAST_INT_EDGES if lo <= e <= hi]
    bulk = rng.integers(lo, hi, size=40, endpoint=True, dtype=np.int64) if code != I64 else \
        rng.integers(-2 ** 62, 2 ** 62, size=40, dtype=np.int64) >> rng.integers(0, 62, 40)
    return Input(code, np.array(edges + list(bulk), dtype=NP_INT[code]))


def cast_cases():
    for src in ALL:
        x = cast_source(src)
        for dst in ALL:
            if src == dst:
                continue
            add_case(f"cast.{NAMES[src]}.{NAMES[dst]}", "cast", {"x": x}, dst, cast(x.value, src, dst), 0,
                     dtype=dst)
    # A cast of a non-contiguous view.
    x = Input(F32, round_f64_to(F32, rng.standard_normal((6, 9)) * 200), v_transpose(0, 1) + v_slice(0, 0, 9, 2))
    add_case("cast.F32.I8.view", "cast", {"x": x}, I8, cast(x.value, F32, I8), 0, dtype=I8)


# ---------------------------------------------------------------------------------------------
# Reductions.

def norm_axes(axes, ndim):
    return tuple(sorted(a % ndim for a in axes)) if axes else tuple(range(ndim))


def reduce_expected(op, code, x, axes, keepdim, ddof=0):
    """(result dtype, out, mode, scale, terms)."""
    ax = norm_axes(axes, x.ndim)
    n = int(np.prod([x.shape[a] for a in ax])) if ax else 1
    kw = dict(axis=ax, keepdims=bool(keepdim))
    if op in ("max", "min"):
        if code in FLOATS:
            xf = to_f32(code, x)
            y = (np.max if op == "max" else np.min)(xf, **kw)
            return code, round_f32_to(code, y), 0, None, None
        return code, (np.max if op == "max" else np.min)(x, **kw), 0, None, None
    if code not in FLOATS:
        xi = x.astype(np.int64)
        if op == "sum":
            return I64, np.sum(xi, **kw), 0, None, None
        if op == "prod":
            return I64, np.prod(xi, **kw), 0, None, None  # wraps like gizml
        if op == "mean":
            # Exact i64 sum / count in f64, then f32 (gizml's rule for ints).
            s = np.sum(xi, **kw).astype(np.float64)
            return F32, (s / n).astype(np.float32), 0, None, None
        code_r, xf = F32, cast(x, code, F32).astype(np.float64)  # gizml casts ints to F32 first
    else:
        code_r, xf = code, to_f32(code, x).astype(np.float64)
    if op == "sum":
        return code_r, np.sum(xf, **kw), 2, np.sum(np.abs(xf), **kw), n
    if op == "mean":
        return code_r, np.mean(xf, **kw), 2, np.mean(np.abs(xf), **kw), n
    if op == "prod":
        p = np.prod(xf, **kw)
        return code_r, p, 2, np.abs(p), n
    if op == "var":
        v = np.var(xf, ddof=ddof, **kw)
        return code_r, v, 2, v, n
    raise ValueError(op)


def add_reduce(name, op, x, axes=(), keepdim=False, ddof=None):
    r, out, mode, scale, terms = reduce_expected(op, x.code, x.value, axes, keepdim, ddof or 0)
    attrs = dict(axes=list(axes), keepdim=int(keepdim))
    if op == "var":
        attrs["ddof"] = ddof or 0
    add_case(name, "reduce." + op, {"x": x}, r if mode != 2 else F64, out, mode, rdtype=r, scale=scale,
             terms=terms, **attrs)


def reduction_cases():
    shapes_axes = [((1023,), ()), ((7, 33), (1,)), ((7, 33), (0,)), ((3, 5, 7), (0, 2)), ((3, 5, 7), (-1,)),
                   ((3, 5, 7), ()), ((2, 5000), (1,)), ((1,), (0,))]
    for op in ("sum", "mean", "max", "min", "var", "prod"):
        for i, (shape, axes) in enumerate(shapes_axes):
            if op == "prod" and int(np.prod(shape)) > 40:
                x = randn(shape, F32, 0.2, 1.0)  # products near 1
                if len(shape) == 2 and shape[1] == 5000:
                    continue
            else:
                x = randn(shape, F32, 1.0, 0.5 if op != "var" else 1.0)
            for keepdim in ((False, True) if i in (1, 3) else (False,)):
                tag = "x".join(map(str, shape)) + ".axes" + ("_".join(map(str, axes)) or "all") + (".keep" if keepdim else "")
                add_reduce(f"reduce.{op}.F32.{tag}", op, x, axes, keepdim, ddof=0 if op == "var" else None)
        # F16 / BF16, ints, views.
        for code in (F16, BF16):
            x = randn((5, 7), code, 1.0 if op != "prod" else 0.3, 0.0 if op != "prod" else 1.0)
            add_reduce(f"reduce.{op}.{NAMES[code]}.5x7.axes1", op, x, (1,), False, 0 if op == "var" else None)
        for code in INTS:
            lo, hi = (-3, 3) if op == "prod" else (None, None)
            if code == U8 and op == "prod":
                lo, hi = 0, 3
            x = rand_ints((4, 9), code, lo, hi)
            add_reduce(f"reduce.{op}.{NAMES[code]}.4x9.axes1", op, x, (1,), True, 0 if op == "var" else None)
        if op in ("sum", "max", "min", "mean"):
            x = rand_bools((5, 7))
            if op in ("sum", "max", "min"):
                add_reduce(f"reduce.{op}.Bool.5x7.axes0", op, x, (0,), False)
        x = Input(F32, round_f64_to(F32, rng.standard_normal((9, 12))), v_transpose(0, 1) + v_slice(1, 1, 9, 3))
        add_reduce(f"reduce.{op}.F32.view.axes0", op, x, (0,), False, 0 if op == "var" else None)
    # NaN propagation in max/min, variance with ddof=1, int wraparound in prod.
    x = randn((3, 33))
    x.base[1, 5] = NAN
    x.base[2, 0] = INF
    for op in ("max", "min", "sum"):
        add_reduce(f"reduce.{op}.F32.nan_inf.axes1", op, x, (1,), False)
    add_reduce("reduce.var.F32.ddof1", "var", randn((7, 33), F32, 2.0, 1.0), (1,), False, ddof=1)
    add_reduce("reduce.var.I32.ddof1", "var", rand_ints((7, 33), I32, -1000, 1000), (0,), True, ddof=1)
    add_reduce("reduce.prod.I64.wrap", "prod", rand_ints((3, 9), I64, -(1 << 20), 1 << 20), (1,), False)
    add_reduce("reduce.sum.I64.wrap", "sum", Input(I64, np.array([2 ** 63 - 1, 5, -3, 2 ** 62], dtype=np.int64)), (), False)


def arg_cases():
    for op in ("argmax", "argmin"):
        fn = np.argmax if op == "argmax" else np.argmin
        specs = [("F32.1023", randn((1023,)), 0, False), ("F32.7x33.axis1", randn((7, 33)), 1, False),
                 ("F32.7x33.axis0.keep", randn((7, 33)), 0, True), ("F16.5x7.axis-1", randn((5, 7), F16), -1, True),
                 ("BF16.5x7.axis0", randn((5, 7), BF16), 0, False), ("I8.4x9.axis1", rand_ints((4, 9), I8, -3, 3), 1, False),
                 ("U8.4x9.axis0", rand_ints((4, 9), U8, 0, 3), 0, False), ("I32.3x5x7.axis1", rand_ints((3, 5, 7), I32), 1, False),
                 ("I64.33", rand_ints((33,), I64), 0, False), ("Bool.5x7.axis1", rand_bools((5, 7)), 1, False)]
        xn = randn((4, 9))
        xn.base[1, 3] = NAN
        xn.base[2, 0] = NAN
        xn.base[2, 5] = NAN
        xn.base[3, :] = 1.0  # ties: the first index
        specs.append(("F32.nan_ties.axis1", xn, 1, False))
        specs.append(("F32.view.axis0", Input(F32, round_f64_to(F32, rng.standard_normal((8, 6))),
                                              v_transpose(0, 1) + v_slice(1, 7, -9, -2)), 0, False))
        for tag, x, axis, keep in specs:
            xv = to_f32(x.code, x.value) if x.code in FLOATS else x.value
            out = fn(xv, axis=axis, keepdims=keep).astype(np.int64)
            add_case(f"{op}.{tag}", op, {"x": x}, I64, out, 0, axis=axis, keepdim=int(keep))


def softmax_cases():
    specs = [("F32.7x33.axis-1", randn((7, 33), F32, 3.0), -1), ("F32.7x33.axis0", randn((7, 33), F32, 3.0), 0),
             ("F32.1023", randn((1023,), F32, 5.0), 0), ("F32.3x5x7.axis1", randn((3, 5, 7), F32, 2.0), 1),
             ("F16.5x7.axis1", randn((5, 7), F16, 2.0), 1), ("BF16.5x7.axis1", randn((5, 7), BF16, 2.0), 1),
             ("I32.4x9.axis1", rand_ints((4, 9), I32, -5, 5), 1),
             ("F32.view", Input(F32, round_f64_to(F32, rng.standard_normal((9, 7)) * 3), v_transpose(0, 1)), -1)]
    xe = randn((3, 9), F32, 2.0)
    xe.base[0, 2] = -INF
    xe.base[1, :] = 50.0  # a flat row
    xe.base[2, 4] = 80.0  # one dominant entry
    specs.append(("F32.edges", xe, 1))
    for tag, x, axis in specs:
        xf = (to_f32(x.code, x.value) if x.code in FLOATS else cast(x.value, x.code, F32)).astype(np.float64)
        r = x.code if x.code in FLOATS else F32
        m = np.max(xf, axis=axis, keepdims=True)
        e = np.exp(xf - m)
        s = np.sum(e, axis=axis, keepdims=True)
        n = xf.shape[axis]
        sm = e / s
        # x - max is rounded in f32, which moves exp(x - max) by |x - max| 2^-24 relatively: the
        # scale counts it as |x - max| / n more terms.
        add_case(f"softmax.{tag}", "softmax", {"x": x}, F64, sm, 2, rdtype=r,
                 scale=np.abs(sm) * (1.0 + np.abs(xf - m) / n), terms=n, axis=axis)
        ls = (xf - m) - np.log(s)
        add_case(f"logsoftmax.{tag}", "logsoftmax", {"x": x}, F64, ls, 2, rdtype=r,
                 scale=np.abs(xf - m) + np.abs(np.log(s)) + 1.0, terms=n, axis=axis)


def cumsum_cases():
    specs = [("F32.1023", randn((1023,)), 0), ("F32.7x33.axis1", randn((7, 33)), 1), ("F32.7x33.axis0", randn((7, 33)), 0),
             ("F32.3x5x7.axis-2", randn((3, 5, 7)), -2), ("F16.5x7.axis1", randn((5, 7), F16), 1),
             ("BF16.5x7.axis0", randn((5, 7), BF16), 0),
             ("F32.view", Input(F32, round_f64_to(F32, rng.standard_normal((9, 7))), v_transpose(0, 1) + v_slice(1, 0, 9, 2)), 1)]
    for tag, x, axis in specs:
        xf = to_f32(x.code, x.value).astype(np.float64)
        add_case(f"cumsum.{tag}", "cumsum", {"x": x}, F64, np.cumsum(xf, axis=axis), 2, rdtype=x.code,
                 scale=np.cumsum(np.abs(xf), axis=axis), terms=xf.shape[axis], axis=axis)
    for tag, x, axis in [("I8.4x9.axis1", rand_ints((4, 9), I8), 1), ("U8.33", rand_ints((33,), U8), 0),
                         ("I32.4x9.axis0", rand_ints((4, 9), I32), 0), ("I64.wrap", Input(I64, np.array([2 ** 63 - 2, 5, 7, -3], dtype=np.int64)), 0),
                         ("Bool.5x7.axis1", rand_bools((5, 7)), 1)]:
        out = np.cumsum(x.value.astype(np.int64), axis=axis)
        add_case(f"cumsum.{tag}", "cumsum", {"x": x}, I64, out, 0, axis=axis)


# ---------------------------------------------------------------------------------------------
# matmul, joins, indexing.

def add_matmul(name, a, b):
    t = promote(a.code, b.code)
    t = I64 if t == BOOL else t
    if t in FLOATS:
        af = to_f32(t, cast(a.value, a.code, t) if a.code != t else a.value).astype(np.float64)
        bf = to_f32(t, cast(b.value, b.code, t) if b.code != t else b.value).astype(np.float64)
        out = np.matmul(af, bf)
        scale = np.matmul(np.abs(af), np.abs(bf))
        add_case(name, "matmul", {"a": a, "b": b}, F64, out, 2, rdtype=t, scale=scale, terms=af.shape[-1])
    else:
        av = cast(a.value, a.code, I64).astype(np.int64)
        bv = cast(b.value, b.code, I64).astype(np.int64)
        out = np.matmul(av, bv)  # wraps in int64 like gizml
        add_case(name, "matmul", {"a": a, "b": b}, t, cast(out, I64, t), 0)


def matmul_cases():
    add_matmul("matmul.F32.33x65_65x17", randn((33, 65)), randn((65, 17)))
    add_matmul("matmul.F32.1x1_1x1", randn((1, 1)), randn((1, 1)))
    add_matmul("matmul.F32.5x300_300x7", randn((5, 300)), randn((300, 7)))  # k beyond one 256 block
    add_matmul("matmul.F32.batched_bcast", randn((2, 1, 7, 33)), randn((3, 33, 5)))
    add_matmul("matmul.F32.bT", randn((9, 13)), Input(F32, round_f64_to(F32, rng.standard_normal((11, 13))), v_transpose(0, 1)))
    add_matmul("matmul.F32.aT_batched", Input(F32, round_f64_to(F32, rng.standard_normal((3, 13, 9))), v_transpose(1, 2)),
               randn((13, 6)))
    add_matmul("matmul.F32.stepslice", Input(F32, round_f64_to(F32, rng.standard_normal((8, 20))), v_slice(1, 0, 20, 2)),
               randn((10, 4)))
    add_matmul("matmul.F32.expand_b", randn((4, 5, 6)), Input(F32, round_f64_to(F32, rng.standard_normal((1, 6, 3))), v_expand(4, 6, 3)))
    add_matmul("matmul.F32.vec_mat", randn((33,)), randn((33, 7)))
    add_matmul("matmul.F32.mat_vec", randn((7, 33)), randn((33,)))
    add_matmul("matmul.F32.vec_vec", randn((1023,)), randn((1023,)))
    add_matmul("matmul.F16.7x9_9x5", randn((7, 9), F16), randn((9, 5), F16))
    add_matmul("matmul.BF16.7x9_9x5", randn((7, 9), BF16), randn((9, 5), BF16))
    add_matmul("matmul.I8_F32", rand_ints((5, 7), I8, -10, 10), randn((7, 3)))
    add_matmul("matmul.I32.5x7_7x3", rand_ints((5, 7), I32, -1000, 1000), rand_ints((7, 3), I32, -1000, 1000))
    add_matmul("matmul.I64.wrap", rand_ints((2, 3), I64, -(1 << 40), 1 << 40), rand_ints((3, 2), I64, -(1 << 40), 1 << 40))
    add_matmul("matmul.U8_I8", rand_ints((3, 4), U8), rand_ints((4, 2), I8))
    add_matmul("matmul.Bool", rand_bools((3, 4)), rand_bools((4, 2)))


def join_cases():
    def add_join(name, op, parts, axis):
        t = parts[0].code
        for p in parts[1:]:
            t = promote(t, p.code)
        vals = [cast(p.value, p.code, t) for p in parts]
        out = np.concatenate(vals, axis=axis) if op == "concat" else np.stack(vals, axis=axis)
        add_case(name, op, {f"t{i}": p for i, p in enumerate(parts)}, t, out, 0, axis=axis)

    add_join("concat.F32.axis1", "concat", [randn((3, 5)), randn((3, 2)), randn((3, 1))], 1)
    add_join("concat.F32.axis0", "concat", [randn((1, 7)), randn((33, 7))], 0)
    add_join("concat.views", "concat", [Input(F32, round_f64_to(F32, rng.standard_normal((5, 3))), v_transpose(0, 1)),
                                        Input(F32, round_f64_to(F32, rng.standard_normal((1, 5))), v_expand(2, 5)),
                                        Input(F32, round_f64_to(F32, rng.standard_normal((4, 10))), v_slice(1, 9, -11, -2))], 0)
    add_join("concat.mixed.I8_F16", "concat", [rand_ints((2, 3), I8), randn((2, 4), F16)], -1)
    add_join("concat.mixed.U8_I8_I64", "concat", [rand_ints((2, 3), U8), rand_ints((1, 3), I8), rand_ints((2, 3), I64)], 0)
    add_join("concat.BF16.3d.axis1", "concat", [randn((2, 3, 4), BF16), randn((2, 5, 4), BF16)], 1)
    add_join("concat.Bool", "concat", [rand_bools((4,)), rand_bools((3,))], 0)
    add_join("stack.F32.axis0", "stack", [randn((3, 5)), randn((3, 5)), randn((3, 5))], 0)
    add_join("stack.F32.axis2", "stack", [randn((3, 5)), randn((3, 5))], 2)
    add_join("stack.F32.axis-2", "stack", [randn((3, 5)), Input(F32, round_f64_to(F32, rng.standard_normal((5, 3))), v_transpose(0, 1))], -2)
    add_join("stack.mixed.I32_F16", "stack", [rand_ints((7,), I32, -100, 100), randn((7,), F16)], 1)
    add_join("stack.I64.axis1", "stack", [rand_ints((2, 3), I64), rand_ints((2, 3), I64)], 1)


def index_cases():
    def add_gather(name, x, axis, idx):
        xv, iv = x.value, idx.value.astype(np.int64)
        ax = axis % xv.ndim
        crop = tuple(slice(0, iv.shape[d]) if d != ax else slice(None) for d in range(xv.ndim))
        iv = np.where(iv < 0, iv + xv.shape[ax], iv)
        out = np.take_along_axis(xv[crop], iv, axis=ax)
        add_case(name, "gather", {"x": x, "idx": idx}, x.code, out, 0, axis=axis)

    def add_index_select(name, x, axis, idx):
        out = np.take(x.value, idx.value.astype(np.int64), axis=axis)
        add_case(name, "indexselect", {"x": x, "idx": idx}, x.code, out, 0, axis=axis)

    add_gather("gather.F32.axis0", randn((5, 7)), 0, rand_ints((3, 7), I64, -5, 4))
    add_gather("gather.F32.axis1", randn((5, 7)), 1, rand_ints((5, 4), I64, 0, 6))
    add_gather("gather.F32.axis-1.smaller", randn((5, 7)), -1, rand_ints((2, 9), I32, -7, 6))
    add_gather("gather.I8.3d.axis1", rand_ints((3, 6, 4), I8), 1, rand_ints((3, 2, 4), I64, 0, 5))
    add_gather("gather.F16.view", Input(F16, round_f64_to(F16, rng.standard_normal((7, 5))), v_transpose(0, 1)), 1,
               rand_ints((5, 7), U8, 0, 6))
    add_gather("gather.Bool.axis0", rand_bools((4, 3)), 0, rand_ints((6, 3), I64, 0, 3))
    add_gather("gather.idx_view", randn((6, 8)), 0, Input(I64, rng.integers(0, 6, (8, 6)), v_transpose(0, 1)))
    add_index_select("indexselect.F32.axis1", randn((5, 7, 3)), 1, rand_ints((4,), I32, -7, 6))
    add_index_select("indexselect.F32.axis0", randn((5, 7)), 0, rand_ints((9,), I64, 0, 4))
    add_index_select("indexselect.I64.axis-1", rand_ints((3, 33), I64), -1, rand_ints((5,), I8, -33, 32))
    add_index_select("indexselect.BF16.view", Input(BF16, round_f64_to(BF16, rng.standard_normal((7, 5))), v_transpose(0, 1)), 1,
                     rand_ints((3,), I64, 0, 6))
    add_index_select("indexselect.U8.expand", Input(U8, rng.integers(0, 255, (1, 6)).astype(np.uint8), v_expand(4, 6)), 0,
                     rand_ints((2,), I64, 0, 3))
    add_index_select("indexselect.idx_stepslice", randn((6, 5)), 0, Input(I64, rng.integers(-6, 6, (12,)), v_slice(0, 10, -13, -3)))
    add_index_select("indexselect.idx_expand", randn((6, 5)), 1, Input(I64, np.array([3], dtype=np.int64), v_expand(4)))
    add_index_select("indexselect.empty", randn((3, 4)), 0, Input(I64, np.zeros((0,), dtype=np.int64)))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "data", "tensor", "ops.bin")
    unary_cases()
    binary_cases()
    where_cases()
    cast_cases()
    reduction_cases()
    arg_cases()
    softmax_cases()
    cumsum_cases()
    matmul_cases()
    join_cases()
    index_cases()
    size = write(path)
    assert size < 2 * 1024 * 1024, size
    print(f"{len(cases)} cases, {size} bytes -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
