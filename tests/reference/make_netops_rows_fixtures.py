#!/usr/bin/env python3
"""numpy references for the rows part of gizml::netops (tests/netops/rows_*_test.cpp read them).

Run:  .venv/bin/python tests/reference/make_netops_rows_fixtures.py
Writes tests/data/netops_rows/rows.bin in the GZFX format of make_tensor_fixtures.py.
Deterministic (fixed seed). Each function is written here from the spec's text
(../shared/spec/002_c8711ad8767f6397.txt), not from gizml's code:

- int8 rows: x (BF16 values) times the regular Hadamard matrix of 256 (the Kronecker power of
  H4 = [[1,1,1,-1],[1,1,-1,1],[1,-1,1,1],[-1,1,1,1]] / 2, ConvRot's construction, so its entries
  are +-1/16) group by group. "y" is the exact product (F64, from the matrix), "q" and "s" the
  codes and scales of the F32 steps the spec fixes (four radix-4 stages, lowest digit first; then
  s = max|y| / 127 or / 7 in f32, at least 1e-30; q = rint(y / s) clamped): the codes are exact.
  The script checks that the staged F32 product is the matrix product to 2^-20 relative.
- the modulated norms, gatedNormAdd, PixelNorm and HeadPrep: in F32 with the sums in element order
  ("out"), the test bounds the distance (fma-free element steps: it should be exact).
- attention (attendedRows with groups and queries, crossAttentionRows, neighborhood3d): softmax
  in float64 from the F32 inputs; NATTEN's window start is max(i - k//2, 0) shifted back to
  L - k near the end, with k clipped to the axis length L.
- patchRows and lazyConv / lazyConv3: patches by their definition; the convolutions in float64.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tensor_fixtures import F32, F64, I8, round_bf16_f64, write_cases  # noqa: E402

rng = np.random.default_rng(20261130)
f32 = np.float32
cases = []


def add(name, op, attrs, arrays):
    cases.append((name, op, attrs, [(n, code, np.asarray(a)) for n, code, a in arrays]))


def randn(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(f32)


def inverse_rms(x, eps):
    """1 / sqrt(mean(x^2) + eps) over the last axis, the squares added in element order in f32."""
    acc = np.zeros(x.shape[:-1], f32)
    for c in range(x.shape[-1]):
        acc = (acc + x[..., c] * x[..., c]).astype(f32)
    return (f32(1) / np.sqrt(acc / f32(x.shape[-1]) + f32(eps))).astype(f32)


# ---------------------------------------------------------------------------------------------
# Hadamard INT8 / INT4 rows.

H4 = np.array([[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]], np.float64) / 2
H256 = np.kron(np.kron(np.kron(H4, H4), H4), H4)
assert np.allclose(H256 @ H256.T, np.eye(256)) and np.allclose(np.abs(H256), 1 / 16)
assert np.allclose(H256.sum(axis=1), 1.0)  # regular: every row sums to the same value


def hadamard_f32(x):
    """x [..., 256] times H256 in f32: four radix-4 stages over the base-4 digits, lowest first."""
    v = x.astype(f32).copy()
    step = 1
    while step < 256:
        w = v.reshape(v.shape[:-1] + (256 // (4 * step), 4, step))
        a, b, c, d = (w[..., i, :].copy() for i in range(4))
        w[..., 0, :] = ((a + b) + c - d) * f32(0.5)
        w[..., 1, :] = ((a + b) - c + d) * f32(0.5)
        w[..., 2, :] = ((a - b) + c + d) * f32(0.5)
        w[..., 3, :] = ((b - a) + c + d) * f32(0.5)
        v = w.reshape(v.shape)
        step *= 4
    return v


def int8_rows(x, bits):
    rows, width = x.shape
    groups = x.reshape(rows, width // 256, 256)
    exact = (groups.astype(np.float64) @ H256.T).reshape(rows, width)
    y = hadamard_f32(groups).reshape(rows, width)
    assert np.all(np.abs(y - exact) <= 2.0**-20 * np.abs(exact).max(axis=1, keepdims=True) + 1e-30)
    top, lo = (f32(127), -128) if bits == 8 else (f32(7), -8)
    s = np.maximum(np.abs(y).max(axis=1, keepdims=True) / top, f32(1e-30)).astype(f32)
    q = np.clip(np.rint(y / s), lo, float(top)).astype(np.int8)
    return exact, q, s


def int8_cases():
    for name, rows, width, bits in (("int8_w256_b8", 4, 256, 8), ("int8_w512_b8", 3, 512, 8),
                                    ("int8_w512_b4", 3, 512, 4)):
        x = rng.standard_normal((rows, width)) * rng.uniform(0.2, 3.0, size=(rows, 1))
        x[0, 7] = 40.0  # an outlier channel, what the rotation spreads
        x[-1] = 0.0  # a zero row: s = 1e-30, codes 0
        x = round_bf16_f64(x).astype(f32)  # BF16 activations
        exact, q, s = int8_rows(x, bits)
        add(name, "int8rows", {"bits": [bits]}, [("x", F32, x), ("y", F64, exact), ("q", I8, q), ("s", F32, s)])


# ---------------------------------------------------------------------------------------------
# Modulated norms, gated norm add, PixelNorm.

def modulated(x, w, shift, scale, rowmap, eps, centered):
    if centered:
        acc = np.zeros(x.shape[0], f32)
        for c in range(x.shape[1]):
            acc = (acc + x[:, c]).astype(f32)
        mean = (acc / f32(x.shape[1])).astype(f32)
        xc = (x - mean[:, None]).astype(f32)
    else:
        xc = x
    xhat = (xc * inverse_rms(xc, eps)[:, None]).astype(f32)
    m = rowmap.astype(np.int64)
    return (xhat * w * (f32(1) + scale[m]) + shift[m]).astype(f32)


def norm_cases():
    rows, width, mods = 5, 48, 3
    x = randn(rows, width, scale=2.0) + f32(0.7)
    w = randn(width) * f32(0.3) + f32(1)
    shift, scale = randn(mods, width, scale=0.5), randn(mods, width, scale=0.2)
    rowmap = np.array([2, 0, 1, 2, 0], f32)
    for centered in (0, 1):
        out = modulated(x, w, shift, scale, rowmap, 1e-6, centered)
        add(f"modnorm_c{centered}", "modulatednorm", {"centered": [centered], "eps_e9": [1000]},
            [("x", F32, x), ("w", F32, w), ("shift", F32, shift), ("scale", F32, scale), ("map", F32, rowmap),
             ("out", F32, out)])
    # The INT8 of modulated rows: 256 wide.
    x2, w2 = randn(3, 256, scale=1.5), randn(256) * f32(0.2) + f32(1)
    sh2, sc2 = randn(2, 256, scale=0.3), randn(2, 256, scale=0.1)
    map2 = np.array([1, 0, 1], f32)
    y2 = modulated(x2, w2, sh2, sc2, map2, 1e-6, 1)
    _, q2, s2 = int8_rows(y2, 8)
    add("modint8_c1", "modulatedint8", {"centered": [1], "eps_e9": [1000]},
        [("x", F32, x2), ("w", F32, w2), ("shift", F32, sh2), ("scale", F32, sc2), ("map", F32, map2),
         ("y", F32, y2), ("q", I8, q2), ("s", F32, s2)])

    # gatedNormAdd: x + (y over its RMS times w) times gate[map].
    y = round_bf16_f64(randn(rows, width, scale=3.0)).astype(f32)  # y is BF16 on a GPU
    gate = randn(mods, width, scale=0.5)
    out = (x + y * inverse_rms(y, 1e-5)[:, None] * w * gate[rowmap.astype(np.int64)]).astype(f32)
    add("gatednormadd", "gatednormadd", {"eps_e9": [10000]},
        [("x", F32, x), ("y", F32, y), ("w", F32, w), ("gate", F32, gate), ("map", F32, rowmap), ("out", F32, out)])

    # PixelNorm: each pixel's channel values over their RMS, then SiLU.
    p = randn(2, 6, 5, scale=2.0)
    inv = inverse_rms(np.moveaxis(p, 1, 2), 1e-8)  # [frames, pixels]
    v = (p * inv[:, None, :]).astype(f32)
    add("pixelnorm_act", "pixelnorm", {"act": [1], "eps_e9": [10]},
        [("x", F32, p), ("out", F32, (v / (f32(1) + np.exp(-v))).astype(f32))])


# ---------------------------------------------------------------------------------------------
# HeadPrep and attention over rows.

def head_prep(qkv, n, heads, head, qw, kw, cos, sin, eps, row0):
    out = qkv.copy()
    half = cos.shape[1]
    for part, wgt in ((0, qw), (1, kw)):
        for h in range(heads):
            lo = part * heads * head + h * head
            v = out[:n, lo:lo + head]
            v = (v * inverse_rms(v, eps)[:, None] * wgt).astype(f32)
            c, s = cos[row0:row0 + n], sin[row0:row0 + n]
            a, b = v[:, :half].copy(), v[:, half:2 * half].copy()
            v[:, :half] = a * c - b * s
            v[:, half:2 * half] = b * c + a * s
            out[:n, lo:lo + head] = v
    return out


def softmax_attend(q, k, v, scale):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ v.astype(np.float64)


def attend_rows(qkv, heads, head, group, queries):
    n, hd = qkv.shape[0], heads * head
    nq = queries or n
    out = np.zeros((nq, hd))
    for r in range(nq):
        g0 = r // group * group if group else 0
        g1 = min(g0 + group, n) if group else n
        for h in range(heads):
            q = qkv[r:r + 1, h * head:(h + 1) * head]
            k = qkv[g0:g1, hd + h * head:hd + (h + 1) * head]
            v = qkv[g0:g1, 2 * hd + h * head:2 * hd + (h + 1) * head]
            out[r, h * head:(h + 1) * head] = softmax_attend(q, k, v, 1 / np.sqrt(head))[0]
    return out


def attention_cases():
    heads, head = 2, 8
    qkv = randn(10, 3 * heads * head)
    qw, kw = randn(head) * f32(0.2) + f32(1), randn(head) * f32(0.2) + f32(1)
    ang = rng.uniform(-3, 3, size=(12, 3))
    cos, sin = np.cos(ang).astype(f32), np.sin(ang).astype(f32)
    prepped = head_prep(qkv, 7, heads, head, qw, kw, cos, sin, 1e-6, 2)
    prep = [("qw", F32, qw), ("kw", F32, kw), ("cos", F32, cos), ("sin", F32, sin)]
    add("headprep_n7_row2", "headprep", {"heads": [heads], "head": [head], "n": [7], "row0": [2], "eps_e9": [1000]},
        [("qkv", F32, qkv)] + prep + [("out", F32, prepped)])
    full = head_prep(qkv, 10, heads, head, qw, kw, cos, sin, 1e-6, 0)
    for group, queries in ((4, 0), (0, 6), (3, 5)):
        add(f"attended_g{group}_q{queries}_prep", "attendedrows",
            {"heads": [heads], "head": [head], "group": [group], "queries": [queries], "prep": [1], "eps_e9": [1000]},
            [("qkv", F32, qkv)] + prep + [("out", F64, attend_rows(full, heads, head, group, queries))])
    add("attended_g5_noprep", "attendedrows",
        {"heads": [heads], "head": [head], "group": [5], "queries": [0], "prep": [0]},
        [("qkv", F32, qkv), ("out", F64, attend_rows(qkv, heads, head, 5, 0))])

    # crossAttentionRows: q [nq, heads head] over kv [nk, 2 heads head].
    q, kv = randn(5, heads * head), randn(21, 2 * heads * head)
    out = np.concatenate([softmax_attend(q[:, h * head:(h + 1) * head], kv[:, h * head:(h + 1) * head],
                                         kv[:, heads * head + h * head:heads * head + (h + 1) * head],
                                         1 / np.sqrt(head)) for h in range(heads)], axis=1)
    add("cross_h2", "crossattention", {"heads": [heads], "head": [head]},
        [("q", F32, q), ("kv", F32, kv), ("out", F64, out)])


def window(i, k, length):
    k = min(k, length)
    start = max(i - k // 2, 0)
    if i + k // 2 >= length:  # NATTEN: near the end the window shifts back inside
        start = length - k
    return range(start, start + k)


def neighborhood_cases():
    heads, head, scale = 2, 4, 0.4
    for grid, kernel in (([3, 4, 5], [3, 3, 5]), ([2, 5, 4], [1, 3, 7]), ([4, 3, 6], [3, 1, 3])):
        t, h, w = grid
        qkv = randn(t * h * w, 3 * heads * head)
        hd = heads * head
        out = np.zeros((t * h * w, hd))
        for a in range(t):
            for b in range(h):
                for c in range(w):
                    keys = [(ka * h + kb) * w + kc for ka in window(a, kernel[0], t)
                            for kb in window(b, kernel[1], h) for kc in window(c, kernel[2], w)]
                    r = (a * h + b) * w + c
                    for hh in range(heads):
                        sl = slice(hh * head, (hh + 1) * head)
                        out[r, sl] = softmax_attend(qkv[r:r + 1, sl], qkv[keys, hd:][:, sl],
                                                    qkv[keys, 2 * hd:][:, sl], scale)[0]
        name = "na3d_" + "x".join(map(str, grid)) + "_k" + "x".join(map(str, kernel))
        add(name, "neighborhood3d", {"grid": grid, "kernel": kernel, "heads": [heads], "scale_e6": [400000]},
            [("qkv", F32, qkv), ("out", F64, out)])


# ---------------------------------------------------------------------------------------------
# patchRows, lazyConv, lazyConv3.

def patches(x, kh, kw, pad, r0, r1):
    c, h, w = x.shape
    ow = w + 2 * pad - kw + 1
    out = np.zeros((c * kh * kw, (r1 - r0) * ow), f32)
    for ch in range(c):
        for i in range(kh):
            for j in range(kw):
                for oy in range(r0, r1):
                    for ox in range(ow):
                        y, xx = oy + i - pad, ox + j - pad
                        if 0 <= y < h and 0 <= xx < w:
                            out[(ch * kh + i) * kw + j, (oy - r0) * ow + ox] = x[ch, y, xx]
    return out


def conv2d(x, wt, kh, kw, pad):
    """Direct convolution in float64: [o, oh ow]."""
    c, h, w = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    wk = wt.astype(np.float64).reshape(-1, c, kh, kw)
    out = np.zeros((wk.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("oc,cyx->oyx", wk[:, :, i, j], xp[:, i:i + oh, j:j + ow])
    return out.reshape(wk.shape[0], oh * ow)


def conv_cases():
    x = randn(2, 5, 6)
    for kh, kw, pad, r0, r1 in ((3, 3, 1, 1, 4), (2, 3, 0, 0, 4), (3, 1, 2, 2, 7)):
        add(f"patchrows_k{kh}x{kw}_p{pad}_r{r0}to{r1}", "patchrows",
            {"kh": [kh], "kw": [kw], "pad": [pad], "r0": [r0], "r1": [r1]},
            [("x", F32, x), ("out", F32, patches(x, kh, kw, pad, r0, r1))])
    wt = randn(4, 2 * 3 * 3)
    add("lazyconv_3x3_p1", "lazyconv", {"kh": [3], "kw": [3], "pad": [1]},
        [("x", F32, x), ("w", F32, wt), ("out", F64, conv2d(x, wt, 3, 3, 1))])
    # lazyConv3: frames 1..n of [n + 2, c, h, w], w's inputs in (time, channel, height, width) order.
    v = randn(5, 2, 4, 5)
    w3 = randn(3, 27 * 2)
    out = np.stack([conv2d(v[t - 1:t + 2].reshape(6, 4, 5), w3, 3, 3, 1) for t in range(1, 4)])
    add("lazyconv3", "lazyconv3", {}, [("x", F32, v), ("w", F32, w3), ("out", F64, out)])


def main():
    int8_cases()
    norm_cases()
    attention_cases()
    neighborhood_cases()
    conv_cases()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "netops_rows", "rows.bin")
    size = write_cases(os.path.normpath(path), cases)
    print(f"{len(cases)} cases, {size} bytes -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
