#!/usr/bin/env python3
"""Gradient fixtures from torch's autograd for gizml::grad (tests/grad/test_torch_reference.cpp).

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_grad_fixtures.py
Writes tests/data/grad/torch.bin in the GZFX format of make_tensor_fixtures.py. Each case holds
the inputs (x0, x1, ...), the weights w of the loss sum(f(inputs) * w), the forward value "out"
and torch's gradients (g0, g1, ...). Attribute "transposed" lists inputs that the C++ side reads
as a transposed view (non-contiguous), as torch does here. Deterministic (fixed seed).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

from make_tensor_fixtures import F32, I64, write_cases

torch.manual_seed(0)
rng = np.random.default_rng(7)
cases = []


def r(*shape, lo=-1.5, hi=1.5):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def case(name, op, inputs, fn, transposed=(), ints=None, **attrs):
    tensors = []
    for i, x in enumerate(inputs):
        t = torch.tensor(x)
        if i in transposed:
            t = t.t()  # a strided view, as the C++ side takes it
        tensors.append(t.detach().requires_grad_())
    out = fn(*tensors)
    w = torch.tensor(rng.uniform(-1, 1, size=tuple(out.shape)).astype(np.float32))
    (out * w).sum().backward()
    arrays = [(f"x{i}", F32, x) for i, x in enumerate(inputs)]
    arrays += [("w", F32, w.numpy()), ("out", F32, out.detach().numpy())]
    arrays += [(f"g{i}", F32, t.grad.numpy()) for i, t in enumerate(tensors)]
    if ints is not None:
        arrays.append(("ints", I64, np.asarray(ints, dtype=np.int64)))
    attrs = {k: (list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in attrs.items()}
    attrs["transposed"] = list(transposed)
    cases.append((name, op, attrs, arrays))


def build():
    a, b34, b4, c31 = r(3, 4), r(3, 4), r(4), r(3, 1, lo=0.5, hi=2.0)
    case("add_broadcast", "add", [a, b4], lambda x, y: x + y)
    case("sub_broadcast", "sub", [a, c31], lambda x, y: x - y)
    case("mul_broadcast", "mul", [a, b4], lambda x, y: x * y)
    case("div_broadcast", "div", [a, c31], lambda x, y: x / y)
    case("pow", "pow", [r(3, 4, lo=0.5, hi=2.0), r(4)], lambda x, y: x ** y)
    case("mul_transposed", "mul", [r(4, 3), b34], lambda x, y: x * y, transposed=(0,))
    pos = r(2, 5, lo=0.3, hi=2.0)
    for op, fn, x in [("neg", torch.neg, a), ("exp", torch.exp, a), ("log", torch.log, pos),
                      ("sqrt", torch.sqrt, pos), ("tanh", torch.tanh, a), ("sigmoid", torch.sigmoid, a),
                      ("relu", torch.relu, a), ("silu", F.silu, a), ("gelu", F.gelu, a)]:
        case(op, op, [x], fn)
    case("tanh_transposed", "tanh", [r(5, 3)], torch.tanh, transposed=(0,))
    case("matmul", "matmul", [r(3, 4), r(4, 5)], torch.matmul)
    case("matmul_batched_broadcast", "matmul", [r(2, 3, 4), r(4, 5)], torch.matmul)
    case("matmul_transposed_operand", "matmul", [r(3, 4), r(5, 4)], torch.matmul, transposed=(1,))
    x = r(3, 4, 2)
    case("sum_axis1", "sum", [x], lambda t: t.sum(1), axes=[1], keepdim=0)
    case("sum_axes02_keepdim", "sum", [x], lambda t: t.sum((0, 2), keepdim=True), axes=[0, 2], keepdim=1)
    case("mean_axis2", "mean", [x], lambda t: t.mean(2), axes=[2], keepdim=0)
    case("max_axis1", "max", [x], lambda t: t.amax(1), axes=[1], keepdim=0)
    case("softmax", "softmax", [x], lambda t: t.softmax(1), axis=1)
    case("logsoftmax", "logsoftmax", [x], lambda t: t.log_softmax(-1), axis=-1)
    y = r(4, 6)
    case("reshape", "reshape", [y], lambda t: t.reshape(3, 8), shape=[3, 8])
    case("permute", "permute", [r(2, 3, 4)], lambda t: t.permute(2, 0, 1), axes=[2, 0, 1])
    case("slice_step", "slice", [y], lambda t: t[:, 0:5:2], axis=1, start=0, stop=5, step=2)
    case("broadcast", "broadcast", [y], lambda t: t.expand(2, 4, 6), shape=[2, 4, 6])
    case("concat_repeated", "concat", [y, r(4, 2)], lambda p, q: torch.cat([p, q, p], 1), axis=1)
    case("repeated_use", "repeated", [r(5)], lambda t: (t + t) * torch.tanh(t))
    logits = r(4, 5)
    labels = [4, 0, 2, 2]
    case("cross_entropy", "crossentropy", [logits], lambda t: F.cross_entropy(t, torch.tensor(labels)).reshape(1),
         ints=labels)
    case("layer_norm", "layernorm", [r(3, 5), r(5), r(5)], lambda t, w, bb: F.layer_norm(t, (5,), w, bb, 1e-5))
    case("rms_norm", "rmsnorm", [r(3, 5), r(5)], lambda t, w: F.rms_norm(t, (5,), w, 1e-6))
    ids = [[3, 1], [3, 0]]
    case("embedding", "embedding", [r(4, 3)], lambda t: F.embedding(torch.tensor(ids), t), ints=ids)


if __name__ == "__main__":
    build()
    out = os.path.join(os.path.dirname(__file__), "..", "data", "grad", "torch.bin")
    print(f"{len(cases)} cases, {write_cases(out, cases)} bytes -> {os.path.normpath(out)}")
