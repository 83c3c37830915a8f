// The operations of a Graph: each computes its value with tensor operations and records the
// closure of its gradient (saving only what that gradient reads).
#include <gizml/netops.h>

#include <cmath>

#include "grad/graph_state.h"
#include "tensor/shape_util.h"

namespace gizml::grad {
namespace {

using Grads1 = std::vector<std::optional<Tensor>>;
using tensor::lazy;
using tensor::Lazy;


// Expands a reduced gradient (keepdim or not) back over the reduced axes of `shape`.
Tensor expandReduced(const Tensor& dy, const Shape& shape, const Axes& axes, bool keepdim) {
  const Axes ax = tensor::normalizeAxes(axes, static_cast<int64_t>(shape.size()), "reduce");
  Tensor g = dy;
  if (!keepdim)
    for (int64_t a : ax) g = g.unsqueeze(a);
  return g.expand(shape);
}

int64_t reducedCount(const Shape& shape, const Axes& axes) {
  int64_t n = 1;
  for (int64_t a : tensor::normalizeAxes(axes, static_cast<int64_t>(shape.size()), "mean")) n *= shape[a];
  return n;
}

}  // namespace

Value Graph::add(Value a, Value b) {
  const Tensor& x = value(a);
  const Tensor& y = value(b);
  const Shape sa = x.shape(), sb = y.shape();
  return state_->add(x.add(y), {a, b}, [sa, sb](const Tensor& dy) {
    return Grads1{unbroadcast(dy, sa), unbroadcast(dy, sb)};
  }, "add");
}

Value Graph::sub(Value a, Value b) {
  const Tensor& x = value(a);
  const Tensor& y = value(b);
  const Shape sa = x.shape(), sb = y.shape();
  return state_->add(x.sub(y), {a, b}, [sa, sb](const Tensor& dy) {
    return Grads1{unbroadcast(dy, sa), unbroadcast(dy.neg(), sb)};
  }, "sub");
}

Value Graph::mul(Value a, Value b) {
  const Tensor x = value(a), y = value(b);
  return state_->add(x.mul(y), {a, b}, [x, y](const Tensor& dy) {
    return Grads1{unbroadcast(dy.mul(y), x.shape()), unbroadcast(dy.mul(x), y.shape())};
  }, "mul");
}

Value Graph::div(Value a, Value b) {
  const Tensor x = value(a), y = value(b);
  return state_->add(x.div(y), {a, b}, [x, y](const Tensor& dy) {
    const Tensor da = dy.div(y);
    const Tensor db = (lazy(da).neg() * lazy(x) / lazy(y)).eval();
    return Grads1{unbroadcast(da, x.shape()), unbroadcast(db, y.shape())};
  }, "div");
}

Value Graph::pow(Value a, Value b) {
  const Tensor x = value(a), e = value(b);
  const Tensor out = x.pow(e);
  return state_->add(out, {a, b}, [x, e, out](const Tensor& dy) {
    const Tensor da = (lazy(dy) * lazy(e) * lazy(x).pow(lazy(e) - 1.0)).eval();
    const Tensor db = (lazy(dy) * lazy(out) * lazy(x).log()).eval();
    return Grads1{unbroadcast(da, x.shape()), unbroadcast(db, e.shape())};
  }, "pow");
}

Value Graph::neg(Value x) {
  return state_->add(value(x).neg(), {x}, [](const Tensor& dy) { return Grads1{dy.neg()}; }, "neg");
}

Value Graph::exp(Value x) {
  const Tensor y = value(x).exp();
  return state_->add(y, {x}, [y](const Tensor& dy) { return Grads1{dy.mul(y)}; }, "exp");
}

Value Graph::log(Value x) {
  const Tensor v = value(x);
  return state_->add(v.log(), {x}, [v](const Tensor& dy) { return Grads1{dy.div(v)}; }, "log");
}

Value Graph::sqrt(Value x) {
  const Tensor y = value(x).sqrt();
  return state_->add(y, {x}, [y](const Tensor& dy) { return Grads1{(lazy(dy) * 0.5 / lazy(y)).eval()}; }, "sqrt");
}

Value Graph::tanh(Value x) {
  const Tensor y = value(x).tanh();
  return state_->add(y, {x}, [y](const Tensor& dy) {
    return Grads1{(lazy(dy) * (Lazy(1.0) - lazy(y) * lazy(y))).eval()};
  }, "tanh");
}

Value Graph::sigmoid(Value x) {
  const Tensor y = value(x).sigmoid();
  return state_->add(y, {x}, [y](const Tensor& dy) {
    return Grads1{(lazy(dy) * lazy(y) * (Lazy(1.0) - lazy(y))).eval()};
  }, "sigmoid");
}

Value Graph::relu(Value x) {
  const Tensor v = value(x);
  return state_->add(v.relu(), {x}, [v](const Tensor& dy) {
    return Grads1{tensor::where(lazy(v).gt(Lazy(0.0)), lazy(dy), Lazy(0.0)).eval()};
  }, "relu");
}

Value Graph::silu(Value x) {
  const Tensor v = value(x);
  return state_->add(v.silu(), {x}, [v](const Tensor& dy) {
    // d/dx x s(x) = s (1 + x (1 - s))
    const Lazy s = lazy(v).sigmoid();
    return Grads1{(lazy(dy) * s * (Lazy(1.0) + lazy(v) * (Lazy(1.0) - s))).eval()};
  }, "silu");
}

Value Graph::gelu(Value x) {
  const Tensor v = value(x);
  return state_->add(v.gelu(), {x}, [v](const Tensor& dy) {
    // d/dx x Phi(x) = Phi(x) + x phi(x); Phi from erfc (no tensor erf yet), phi from exp, in
    // double from x's values (exact for every float dtype), then in dy's dtype.
    const std::vector<double> xs = v.toDoubles();
    std::vector<double> d(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      const double z = xs[i];
      d[i] = 0.5 * std::erfc(-z / std::sqrt(2.0)) + z * std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
    }
    return Grads1{dy.mul(placedLike(tensor::tensor(v.shape(), d, dy.dtype()), dy))};
  }, "gelu");
}

Value Graph::matmul(Value a, Value b) {
  const Tensor x = value(a), y = value(b);
  check(x.ndim() >= 2 && y.ndim() >= 2, "grad matmul: operands of shapes " + tensor::shapeText(x.shape()) + " and " +
                                            tensor::shapeText(y.shape()) + " need two axes or more");
  return state_->add(x.matmul(y), {a, b}, [x, y](const Tensor& dy) {
    return Grads1{unbroadcast(dy.matmul(y.transpose(-1, -2)), x.shape()),
                  unbroadcast(x.transpose(-1, -2).matmul(dy), y.shape())};
  }, "matmul");
}

Value Graph::sum(Value x, const Axes& axes, bool keepdim) {
  const Tensor& v = value(x);
  const Shape shape = v.shape();
  return state_->add(v.sum(axes, keepdim), {x}, [shape, axes, keepdim](const Tensor& dy) {
    return Grads1{expandReduced(dy, shape, axes, keepdim).contiguous()};
  }, "sum");
}

Value Graph::mean(Value x, const Axes& axes, bool keepdim) {
  const Tensor& v = value(x);
  const Shape shape = v.shape();
  const double n = static_cast<double>(reducedCount(shape, axes));
  return state_->add(v.mean(axes, keepdim), {x}, [shape, axes, keepdim, n](const Tensor& dy) {
    return Grads1{(lazy(expandReduced(dy, shape, axes, keepdim)) / n).eval()};
  }, "mean");
}

Value Graph::max(Value x, const Axes& axes, bool keepdim) {
  const Tensor v = value(x);
  const Tensor m = v.max(axes, true);
  Tensor out = keepdim ? m : v.max(axes, false);
  return state_->add(out, {x}, [v, m, axes, keepdim](const Tensor& dy) {
    const Tensor isMax = lazy(v).eq(lazy(m)).cast(v.dtype()).eval();
    const Tensor ties = isMax.sum(axes, true);
    const Tensor g = expandReduced(dy, v.shape(), axes, keepdim);
    return Grads1{(lazy(g) * lazy(isMax) / lazy(ties)).eval()};
  }, "max");
}

Value Graph::reshape(Value x, const Shape& shape) {
  const Tensor& v = value(x);
  const Shape original = v.shape();
  return state_->add(v.reshape(shape), {x}, [original](const Tensor& dy) { return Grads1{dy.reshape(original)}; }, "reshape");
}

Value Graph::permute(Value x, const Axes& axes) {
  const Tensor& v = value(x);
  Axes inverse(axes.size());
  const Tensor out = v.permute(axes);
  for (size_t i = 0; i < axes.size(); ++i)
    inverse[static_cast<size_t>(tensor::normalizeAxis(axes[i], v.ndim(), "permute"))] = static_cast<int64_t>(i);
  return state_->add(out, {x}, [inverse](const Tensor& dy) { return Grads1{dy.permute(inverse)}; }, "permute");
}

Value Graph::slice(Value x, int64_t axis, int64_t start, int64_t stop, int64_t step) {
  const Tensor& v = value(x);
  const Shape shape = v.shape();
  const DType dtype = v.dtype();
  return state_->add(v.slice(axis, start, stop, step), {x}, [=](const Tensor& dy) {
    const Tensor g = placedLike(tensor::zeros(shape, dtype), dy);
    tensor::assign(g.slice(axis, start, stop, step), dy);
    return Grads1{g};
  }, "slice");
}

Value Graph::broadcast(Value x, const Shape& shape) {
  const Tensor& v = value(x);
  const Shape original = v.shape();
  return state_->add(v.expand(shape), {x}, [original](const Tensor& dy) { return Grads1{unbroadcast(dy, original)}; }, "broadcast");
}

Value Graph::concat(const std::vector<Value>& xs, int64_t axis) {
  std::vector<Tensor> parts;
  std::vector<int64_t> lengths;
  for (const Value& x : xs) parts.push_back(value(x));
  const Tensor out = tensor::concat(parts, axis);
  const int64_t ax = tensor::normalizeAxis(axis, out.ndim(), "concat");
  for (const Tensor& p : parts) lengths.push_back(p.shape()[ax]);
  return state_->add(out, xs, [lengths, ax](const Tensor& dy) {
    Grads1 gs;
    int64_t start = 0;
    for (int64_t len : lengths) {
      gs.push_back(dy.slice(ax, start, start + len).contiguous());
      start += len;
    }
    return gs;
  }, "concat");
}

Value Graph::softmax(Value x, int64_t axis) {
  const Tensor y = value(x).softmax(axis);
  return state_->add(y, {x}, [y, axis](const Tensor& dy) {
    const Tensor dot = dy.mul(y).sum({axis}, true);
    return Grads1{(lazy(y) * (lazy(dy) - lazy(dot))).eval()};
  }, "softmax");
}

Value Graph::logSoftmax(Value x, int64_t axis) {
  const Tensor y = value(x).logSoftmax(axis);
  return state_->add(y, {x}, [y, axis](const Tensor& dy) {
    const Tensor total = dy.sum({axis}, true);
    return Grads1{(lazy(dy) - lazy(y).exp() * lazy(total)).eval()};
  }, "logSoftmax");
}

Value Graph::crossEntropy(Value logits, const Tensor& labels) {
  const Tensor z = value(logits);
  check(z.ndim() == 2, "crossEntropy: logits of shape " + tensor::shapeText(z.shape()) + " must be [rows, classes]");
  check(labels.ndim() == 1 && labels.shape()[0] == z.shape()[0],
        "crossEntropy: labels of shape " + tensor::shapeText(labels.shape()) + " must be [" + std::to_string(z.shape()[0]) + "]");
  // netops checks the labels' range and computes the loss and its gradient (one implementation).
  const std::vector<int64_t> ids = labels.toInts();
  // The loss in f64 for F64 logits (crossEntropyLoss computes every step in f64 then), else F32.
  const Tensor loss =
      placedLike(tensor::scalar(netops::crossEntropyLoss(z, ids), z.dtype() == DType::F64 ? DType::F64 : DType::F32), z);
  return state_->add(loss, {logits}, [z, ids](const Tensor& dy) {
    // (softmax - onehot) / rows, times the loss's gradient.
    return Grads1{netops::crossEntropyGrad(z, ids, dy.item() / static_cast<double>(z.shape()[0]))};
  }, "crossEntropy");
}

Value Graph::layerNorm(Value x, Value weight, Value bias, double eps) {
  const Tensor v = value(x), w = value(weight), b = value(bias);
  const int64_t n = v.ndim() == 0 ? 1 : v.size(-1);
  check(w.numel() == n && b.numel() == n, "layerNorm: weight of shape " + tensor::shapeText(w.shape()) + " and bias of shape " +
                                              tensor::shapeText(b.shape()) + " must hold the " + std::to_string(n) + " values of a row");
  const std::vector<Tensor> f = netops::layerNorm(v, w.reshape({n}), b.reshape({n}), eps);
  const Tensor mean = f[1], rstd = f[2];
  const Shape ws = w.shape(), bs = b.shape();
  return state_->add(f[0], {x, weight, bias}, [v, w, mean, rstd, n, ws, bs](const Tensor& dy) {
    const std::vector<Tensor> g = netops::layerNormGrad(dy, v, w.reshape({n}), mean, rstd);
    return Grads1{g[0], g[1].reshape(ws), g[2].reshape(bs)};
  }, "layerNorm");
}

Value Graph::rmsNorm(Value x, Value weight, double eps) {
  const Tensor v = value(x), w = value(weight);
  const Tensor rstd = (lazy(v.mul(v).mean({-1}, true)) + eps).rsqrt().eval();
  const Tensor out = (lazy(v) * lazy(rstd) * lazy(w)).eval();
  return state_->add(out, {x, weight}, [v, w, rstd](const Tensor& dy) {
    // dx = rstd (g - x rstd^2 mean(g x)), g = dy w; dw = sum over rows of dy x rstd.
    const Tensor g = dy.mul(w);
    const Tensor mgx = g.mul(v).mean({-1}, true);
    const Tensor dx = (lazy(rstd) * (lazy(g) - lazy(v) * lazy(rstd) * lazy(rstd) * lazy(mgx))).eval();
    Axes rows;
    for (int64_t i = 0; i + 1 < dy.ndim(); ++i) rows.push_back(i);
    const Tensor dwFull = (lazy(dy) * lazy(v) * lazy(rstd)).eval();
    return Grads1{dx, unbroadcast(rows.empty() ? dwFull : dwFull.sum(rows), w.shape())};
  }, "rmsNorm");
}

Value Graph::embedding(Value table, const Tensor& ids) {
  const Tensor t = value(table);
  check(t.ndim() == 2, "embedding: table of shape " + tensor::shapeText(t.shape()) + " must be [vocab, dim]");
  const Tensor flat = ids.reshape({ids.numel()});
  Shape outShape = ids.shape();
  outShape.push_back(t.shape()[1]);
  const Tensor out = t.indexSelect(0, flat).reshape(outShape);
  return state_->add(out, {table}, [t, flat](const Tensor& dy) {
    // Rows of dy added into the rows they came from, in id order: in f32 (f64 for an F64 table).
    const int64_t dim = t.shape()[1];
    const std::vector<int64_t> idx = flat.toInts();
    const Tensor rows = dy.reshape({flat.numel(), dim});
    auto scatter = [&]<class R>(DType work, const std::vector<R>& values) {
      Tensor g = tensor::zeros(t.shape(), work);
      R* out = g.template data<R>();
      for (size_t r = 0; r < idx.size(); ++r)
        for (int64_t j = 0; j < dim; ++j) out[idx[r] * dim + j] += values[r * static_cast<size_t>(dim) + static_cast<size_t>(j)];
      return g.cast(t.dtype());
    };
    const Tensor g = t.dtype() == DType::F64 ? scatter(DType::F64, rows.toDoubles()) : scatter(DType::F32, rows.toFloats());
    return Grads1{placedLike(g, dy)};
  }, "embedding");
}

Value Graph::dropout(Value x, double p, const tensor::Key& key) {
  // The mask comes from the key alone, so the backward pass applies it again to dy.
  return state_->add(netops::dropout(value(x), key, p), {x}, [key, p](const Tensor& dy) {
    return Grads1{netops::dropout(dy, key, p)};
  }, "dropout");
}

Value Graph::custom(const std::vector<Value>& inputs, const Tensor& output, GradFn gradFn) {
  std::vector<Shape> shapes;
  for (const Value& v : inputs) shapes.push_back(value(v).shape());
  return state_->add(output, inputs, [shapes, gradFn = std::move(gradFn)](const Tensor& dy) {
    const std::vector<Tensor> gs = gradFn(dy);
    check(gs.size() == shapes.size(), "custom: the gradient function gave " + std::to_string(gs.size()) +
                                          " tensors for " + std::to_string(shapes.size()) + " inputs");
    Grads1 out;
    for (size_t i = 0; i < gs.size(); ++i) {
      check(gs[i].shape() == shapes[i], "custom: gradient " + std::to_string(i) + " has shape " +
                                            tensor::shapeText(gs[i].shape()) + ", its input " + tensor::shapeText(shapes[i]));
      out.push_back(gs[i]);
    }
    return out;
  }, "custom");
}

}  // namespace gizml::grad
