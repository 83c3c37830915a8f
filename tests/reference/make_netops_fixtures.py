#!/usr/bin/env python3
"""Fixtures from torch for gizml::netops (tests/netops/torch_reference_test.cpp).

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_netops_fixtures.py
Writes tests/data/netops/torch.bin in the GZFX format of make_tensor_fixtures.py. Inputs are F32;
torch computes in f64 from them and the results are stored as F32 (the loss as F64), so a
test's tolerance measures our f32 rounding alone. Layouts are gizml's (time first for the 1-D
convolutions, [rows, c k h w] patches); each case says how torch's are transposed to them.
Deterministic (fixed seed).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

from make_tensor_fixtures import F32, F64, I64, write_cases

rng = np.random.default_rng(11)
cases = []


def r(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def d(a):
    """An f64 torch tensor of the f32 input."""
    return torch.tensor(np.asarray(a, dtype=np.float64))


def f32(t):
    return t.detach().numpy().astype(np.float32)


def add(name, op, attrs, arrays):
    cases.append((name, op, {k: (list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in attrs.items()},
                  [(n, code, a) for n, code, a in arrays]))


def affine_case(name, rows, inp, out):
    x, w, b = r(rows, inp), r(out, inp), r(out)
    add(name, "affine", {}, [("x", F32, x), ("w", F32, w), ("b", F32, b), ("y", F32, f32(F.linear(d(x), d(w), d(b))))])


def layer_norm_case(name, shape, eps=1e-5):
    x, w, b = r(*shape, lo=-3, hi=3), r(shape[-1], lo=0.5, hi=1.5), r(shape[-1])
    dy = r(*shape)
    xt, wt, bt = (d(a).requires_grad_() for a in (x, w, b))
    y = F.layer_norm(xt, (shape[-1],), wt, bt, eps)
    y.backward(d(dy))
    xd = d(x)
    mean = xd.mean(-1)
    rstd = 1.0 / torch.sqrt(xd.var(-1, unbiased=False) + eps)
    add(name, "layer_norm", {"eps_e9": round(eps * 1e9)},
        [("x", F32, x), ("w", F32, w), ("b", F32, b), ("dy", F32, dy), ("y", F32, f32(y)), ("mean", F32, f32(mean)),
         ("rstd", F32, f32(rstd)), ("dx", F32, f32(xt.grad)), ("dw", F32, f32(wt.grad)), ("db", F32, f32(bt.grad))])


def cross_entropy_case(name, rows, classes, spread=4.0):
    x = r(rows, classes, lo=-spread, hi=spread)
    labels = rng.integers(0, classes, size=rows)
    xt = d(x).requires_grad_()
    per_row = F.cross_entropy(xt, torch.tensor(labels), reduction="none")
    loss = per_row.mean()
    loss.backward()
    add(name, "cross_entropy", {},
        [("logits", F32, x), ("labels", I64, labels), ("rows", F32, f32(per_row)),
         ("loss", F64, np.array([loss.item()])), ("grad", F32, f32(xt.grad))])


def attention_case(name, b, tq, tk, dim, e, causal, scale=None):
    q, k, v = r(b, tq, dim), r(b, tk, dim), r(b, tk, e)
    s = 1.0 / math.sqrt(dim) if scale is None else scale
    # gizml's causal mask is bottom-right (query i sees keys j <= i + tk - tq, a KV cache's);
    # torch's is_causal is top-left when tq != tk, so the mask is given explicitly.
    mask = torch.ones(tq, tk, dtype=torch.bool).tril(tk - tq) if causal else None
    out = F.scaled_dot_product_attention(d(q), d(k), d(v), attn_mask=mask, scale=s)
    add(name, "attention", {"causal": int(causal), "scale_e9": round(s * 1e9)},
        [("q", F32, q), ("k", F32, k), ("v", F32, v), ("out", F32, f32(out))])


def unfold_case(name, n, c, h, w, kh, kw, stride, pad):
    x = r(n, c, h, w)
    cols = F.unfold(d(x), (kh, kw), padding=pad, stride=stride)  # [n, c kh kw, L]
    cols = cols.transpose(1, 2).reshape(-1, c * kh * kw)  # gizml's [n L, c kh kw]
    g = r(*cols.shape)
    folded = F.fold(d(g).reshape(n, -1, c * kh * kw).transpose(1, 2), (h, w), (kh, kw), padding=pad, stride=stride)
    add(name, "unfold", {"kh": kh, "kw": kw, "stride": stride, "pad": pad},
        [("x", F32, x), ("cols", F32, f32(cols)), ("g", F32, g), ("folded", F32, f32(folded))])


def unfold1d_case(name, t, c, k, stride, pad, dilation):
    x = r(t, c)
    cols = F.unfold(d(x).T.reshape(1, c, 1, t), (1, k), dilation=(1, dilation), padding=(0, pad), stride=(1, stride))
    add(name, "unfold1d", {"k": k, "stride": stride, "pad": pad, "dilation": dilation},
        [("x", F32, x), ("cols", F32, f32(cols[0].T))])


def conv1d_case(name, t, c, o, k, stride, pad, dilation, bias=True):
    x, w, b = r(t, c), r(o, c, k), r(o)
    y = F.conv1d(d(x).T[None], d(w), d(b) if bias else None, stride=stride, padding=pad, dilation=dilation)[0].T
    arrays = [("x", F32, x), ("w", F32, w), ("y", F32, f32(y))] + ([("b", F32, b)] if bias else [])
    add(name, "conv1d", {"stride": stride, "pad": pad, "dilation": dilation}, arrays)


def conv_transpose1d_case(name, n, c, o, k, stride, pad, bias=True):
    x, w, b = r(n, c), r(c, o, k), r(o)
    y = F.conv_transpose1d(d(x).T[None], d(w), d(b) if bias else None, stride=stride, padding=pad)[0].T
    arrays = [("x", F32, x), ("w", F32, w), ("y", F32, f32(y))] + ([("b", F32, b)] if bias else [])
    add(name, "conv_transpose1d", {"stride": stride, "pad": pad}, arrays)


def pool_case(name, shape, size, stride, average):
    x = r(*shape)
    xt = d(x).requires_grad_()
    y = (F.avg_pool2d if average else F.max_pool2d)(xt, size, stride)
    dy = r(*y.shape)
    y.backward(d(dy))
    add(name, "pool2d", {"size": size, "stride": stride, "average": int(average)},
        [("x", F32, x), ("y", F32, f32(y)), ("dy", F32, dy), ("dx", F32, f32(xt.grad))])


def group_norm_case(name, shape, groups, act, eps=1e-5, loc=0.0):
    x, w, b = r(*shape, lo=loc - 3, hi=loc + 3), r(shape[0], lo=0.5, hi=1.5), r(shape[0])
    y = F.group_norm(d(x)[None], groups, d(w), d(b), eps)[0]
    if act:
        y = F.silu(y)
    add(name, "group_norm", {"groups": groups, "act": int(act), "eps_e9": round(eps * 1e9)},
        [("x", F32, x), ("w", F32, w), ("b", F32, b), ("y", F32, f32(y))])


def build():
    affine_case("affine", 5, 19, 7)
    layer_norm_case("layer_norm_2d", (6, 24))
    layer_norm_case("layer_norm_3d", (2, 3, 17), eps=1e-3)
    cross_entropy_case("cross_entropy_small", 7, 5)
    cross_entropy_case("cross_entropy_wide", 3, 1000, spread=12.0)
    attention_case("attention_plain", 2, 5, 7, 8, 6, False)
    attention_case("attention_blocks", 2, 9, 53, 16, 12, False, scale=0.3)
    attention_case("attention_causal_square", 1, 20, 20, 8, 8, True)
    attention_case("attention_causal_cache", 2, 3, 37, 8, 5, True)
    unfold_case("unfold_stride2_pad1", 2, 3, 6, 5, 3, 2, 2, 1)
    unfold_case("unfold_overlap", 1, 2, 5, 5, 3, 3, 1, 1)
    unfold1d_case("unfold1d_dilated", 11, 3, 3, 2, 1, 2)
    conv1d_case("conv1d", 11, 3, 4, 3, 2, 1, 2)
    conv1d_case("conv1d_nobias", 9, 5, 2, 4, 1, 2, 1, bias=False)
    conv_transpose1d_case("conv_transpose1d", 6, 3, 4, 4, 2, 1)
    conv_transpose1d_case("conv_transpose1d_nobias", 5, 2, 3, 3, 3, 0, bias=False)
    pool_case("max_pool_overlap", (2, 3, 7, 6), 3, 2, False)
    pool_case("max_pool_tiles", (1, 2, 6, 8), 2, 2, False)
    pool_case("avg_pool_overlap", (2, 3, 7, 6), 3, 2, True)
    pool_case("avg_pool_step1", (1, 2, 5, 5), 2, 1, True)
    group_norm_case("group_norm", (6, 4, 5), 3, False)
    group_norm_case("group_norm_silu_offset", (8, 3, 3, 3), 2, True, loc=50.0)


if __name__ == "__main__":
    import os
    build()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "netops", "torch.bin")
    print(f"{len(cases)} cases, {write_cases(path, cases)} bytes -> {os.path.normpath(path)}")
