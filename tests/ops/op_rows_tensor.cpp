// The rows of include/gizml/tensor.h's operations. Elementwise rows run every dtype of
// kAllDTypes on an odd contiguous shape, and a float and a half dtype on a transposed view, a
// step-2 slice and a broadcast operand; an operation the CPU rejects for a dtype must be rejected
// by every backend too. Tolerances on a GPU follow docs/tensor.md ("On a GPU"): bit-equal but for
// the GPU's own exp/log/sin/cos/tanh/erf/pow (CUDA's documented error bounds: 2 ulps, and those
// of composed functions near their zeros, where floor bounds the error absolutely) and
// matmul of halves on tensor cores.
#include <cmath>

#include "ops/op_table.h"

namespace gizml::test::ops {
namespace {

using T::BinaryOp;
using T::UnaryOp;

const T::Shape kOdd = {5, 7};

struct UnaryName {
  UnaryOp op;
  const char* member;  // the enum member's name
  const char* method;  // Tensor's method ("" where there is none: Not is reached through unary())
  Tolerance gpu;
};
// exp, log, sin, cos, tanh: CUDA's expf/logf/sinf/cosf/tanhf are within 2 ulps (CUDA C
// Programming Guide, "Mathematical Functions"); sigmoid, silu and the GELUs compose them, so
// near their zeros the error is bounded by a few ulps of 1 instead (floor 1).
const UnaryName kUnary[] = {
    {UnaryOp::Neg, "Neg", "neg", kBits},
    {UnaryOp::Abs, "Abs", "abs", kBits},
    {UnaryOp::Exp, "Exp", "exp", ulps(2)},
    {UnaryOp::Log, "Log", "log", ulps(2)},
    {UnaryOp::Sqrt, "Sqrt", "sqrt", kBits},
    {UnaryOp::Rsqrt, "Rsqrt", "rsqrt", kBits},
    {UnaryOp::Sin, "Sin", "sin", ulps(2, 1)},
    {UnaryOp::Cos, "Cos", "cos", ulps(2, 1)},
    {UnaryOp::Tanh, "Tanh", "tanh", ulps(2, 1)},
    {UnaryOp::Sigmoid, "Sigmoid", "sigmoid", ulps(4, 1)},
    {UnaryOp::Relu, "Relu", "relu", kBits},
    {UnaryOp::Silu, "Silu", "silu", ulps(4, 1)},
    {UnaryOp::GeluErf, "GeluErf", "gelu", ulps(4, 1)},
    {UnaryOp::GeluTanh, "GeluTanh", "geluTanh", ulps(4, 1)},
    {UnaryOp::Floor, "Floor", "floor", kBits},
    {UnaryOp::Ceil, "Ceil", "ceil", kBits},
    {UnaryOp::Round, "Round", "round", kBits},
    {UnaryOp::Sign, "Sign", "sign", kBits},
    {UnaryOp::Not, "Not", "", kBits},
};

struct BinaryName {
  BinaryOp op;
  const char* member;
  const char* method;
  Tolerance gpu;
};
const BinaryName kBinary[] = {
    {BinaryOp::Add, "Add", "add", kBits},      {BinaryOp::Sub, "Sub", "sub", kBits},
    {BinaryOp::Mul, "Mul", "mul", kBits},      {BinaryOp::Div, "Div", "div", kBits},
    {BinaryOp::Pow, "Pow", "pow", ulps(2, 1)}, {BinaryOp::Min, "Min", "min", kBits},
    {BinaryOp::Max, "Max", "max", kBits},      {BinaryOp::Mod, "Mod", "mod", kBits},
    {BinaryOp::Eq, "Eq", "eq", kBits},         {BinaryOp::Ne, "Ne", "ne", kBits},
    {BinaryOp::Lt, "Lt", "lt", kBits},         {BinaryOp::Le, "Le", "le", kBits},
    {BinaryOp::Gt, "Gt", "gt", kBits},         {BinaryOp::Ge, "Ge", "ge", kBits},
    {BinaryOp::And, "And", "", kBits},         {BinaryOp::Or, "Or", "", kBits},
};

std::vector<std::string> names(const std::string& enumName, const char* method, const char* freeFunction) {
  std::vector<std::string> n = {enumName, std::string("tensor::") + freeFunction};
  if (*method) n.push_back(std::string("tensor::") + method);
  return n;
}

// The views every elementwise row reads besides a contiguous tensor: a transpose and a step-2
// slice, taken on the backend.
T::Tensor transposedOn(const Place& place, uint64_t seed, DType dtype) {
  return place(values(seed, {kOdd[1], kOdd[0]}, dtype)).transpose(0, 1);
}
T::Tensor slicedOn(const Place& place, uint64_t seed, DType dtype) {
  return place(values(seed, {kOdd[0], 2 * kOdd[1] + 1}, dtype)).slice(1, 1, 2 * kOdd[1] + 1, 2);
}

std::vector<OpRow> unaryRows() {
  std::vector<OpRow> rows;
  for (const UnaryName& u : kUnary) {
    rows.push_back({names(std::string("UnaryOp::") + u.member, u.method, "unary"), u.gpu,
                    [op = u.op](const Place& place, Outputs& out) {
                      for (DType t : kAllDTypes)
                        add(out, label(t, kOdd), [&] { return T::unary(op, place(values(1, kOdd, t))); });
                      for (DType t : {DType::F32, DType::F16}) {
                        add(out, label(t, kOdd, "transposed"), [&] { return T::unary(op, transposedOn(place, 2, t)); });
                        add(out, label(t, kOdd, "step-2 slice"), [&] { return T::unary(op, slicedOn(place, 3, t)); });
                      }
                    }});
  }
  return rows;
}

std::vector<OpRow> binaryRows() {
  std::vector<OpRow> rows;
  for (const BinaryName& b : kBinary) {
    rows.push_back({names(std::string("BinaryOp::") + b.member, b.method, "binary"), b.gpu,
                    [op = b.op](const Place& place, Outputs& out) {
                      for (DType t : kAllDTypes)
                        add(out, label(t, kOdd),
                            [&] { return T::binary(op, place(values(4, kOdd, t)), place(values(5, kOdd, t))); });
                      for (DType t : {DType::F32, DType::BF16}) {
                        add(out, label(t, kOdd, "transposed, sliced"),
                            [&] { return T::binary(op, transposedOn(place, 6, t), slicedOn(place, 7, t)); });
                        add(out, label(t, kOdd, "row broadcast"),
                            [&] { return T::binary(op, place(values(8, kOdd, t)), place(values(9, {kOdd[1]}, t))); });
                      }
                      // Mixed dtypes: the promotion (docs/tensor.md) on every backend.
                      add(out, "i32 with bf16", [&] {
                        return T::binary(op, place(values(10, kOdd, DType::I32)), place(values(11, kOdd, DType::BF16)));
                      });
                    }});
  }
  return rows;
}

std::vector<OpRow> shapeRows() {
  std::vector<OpRow> rows;
  rows.push_back({{"tensor::cast"}, kBits, [](const Place& place, Outputs& out) {
                    for (DType from : kAllDTypes) {
                      const auto x = place(values(12, kOdd, from));
                      for (DType to : kAllDTypes)
                        add(out, std::string(dtypeName(from)) + " to " + dtypeName(to), [&] { return x.cast(to); });
                      add(out, label(from, kOdd, "transposed to f32"),
                          [&] { return transposedOn(place, 13, from).cast(DType::F32); });
                    }
                  }});
  // Views copied by contiguous() and clone() on the backend.
  rows.push_back(
      {{"tensor::contiguous", "tensor::clone", "tensor::reshape", "tensor::permute", "tensor::transpose",
        "tensor::slice", "tensor::expand", "tensor::squeeze", "tensor::unsqueeze"},
       kBits,
       [](const Place& place, Outputs& out) {
         for (DType t : {DType::F32, DType::BF16, DType::I8, DType::Bool}) {
           const auto x = place(values(14, {3, 1, 5, 7}, t));
           add(out, label(t, {3, 1, 5, 7}, "permuted"), [&] { return x.permute({3, 0, 2, 1}).contiguous(); });
           add(out, label(t, {3, 1, 5, 7}, "sliced back to front"), [&] { return x.slice(2, -1, -6, -2).clone(); });
           add(out, label(t, {3, 1, 5, 7}, "squeezed, transposed, reshaped"),
               [&] { return x.squeeze().transpose(0, 2).reshape({-1}); });
           add(out, label(t, {3, 1, 5, 7}, "expanded"), [&] {
             return x.squeeze(1).unsqueeze(0).expand({2, 3, 5, 7}).contiguous();
           });
         }
       }});
  rows.push_back({{"tensor::concat", "tensor::stack"}, kBits, [](const Place& place, Outputs& out) {
                    for (DType t : {DType::F32, DType::F16, DType::I64}) {
                      const auto a = place(values(15, kOdd, t)), b = transposedOn(place, 16, t);
                      add(out, label(t, kOdd, "concat"), [&] { return T::concat({a, b, a.slice(1, 0, 3)}, 1); });
                      add(out, label(t, kOdd, "stack"), [&] { return T::stack({a, b}, 1); });
                    }
                  }});
  rows.push_back({{"tensor::gather", "tensor::indexSelect"}, kBits, [](const Place& place, Outputs& out) {
                    const auto idx = T::tensor({4}, {4, 0, -1, 2}, DType::I64);
                    const auto gidx = T::tensor({2, 7}, {0, 1, 2, 3, 4, 0, 1, 4, 3, 2, 1, 0, 4, 3}, DType::I32);
                    for (DType t : {DType::F32, DType::BF16, DType::I32}) {
                      const auto x = transposedOn(place, 17, t);
                      add(out, label(t, kOdd, "indexSelect"), [&] { return x.indexSelect(0, place(idx)); });
                      add(out, label(t, kOdd, "gather"), [&] { return T::gather(x, 0, place(gidx)); });
                    }
                  }});
  rows.push_back({{"tensor::assign"}, kBits, [](const Place& place, Outputs& out) {
                    for (DType t : {DType::F32, DType::F16, DType::I8}) {
                      const auto dst = place(T::zeros({5, 9}, t));
                      T::assign(dst.slice(1, 1, 8), transposedOn(place, 18, DType::F32));
                      T::assign(dst.slice(0, 0, 5, 2).slice(1, 8, 9), place(values(19, {1}, DType::I32)));
                      add(out, label(t, {5, 9}, "assigned into slices"), [&] { return dst; });
                    }
                  }});
  rows.push_back({{"tensor::where"}, kBits, [](const Place& place, Outputs& out) {
                    for (DType t : kAllDTypes)
                      add(out, label(t, kOdd), [&] {
                        return T::where(place(values(20, kOdd, DType::Bool)), place(values(21, kOdd, t)),
                                        transposedOn(place, 22, t));
                      });
                    add(out, "row broadcast, f32 condition", [&] {
                      return T::where(place(values(23, {kOdd[1]})), place(values(24, kOdd)), place(T::scalar(-1.0)));
                    });
                  }});
  return rows;
}

// Fused chains: the same Lazy code builds both the eager results above and these.
std::vector<OpRow> lazyRows() {
  return {{{"tensor::lazy", "tensor::eval", "tensor::evalInto"}, ulps(4, 1), [](const Place& place, Outputs& out) {
             for (DType t : {DType::F32, DType::BF16, DType::I32}) {
               const auto x = place(values(25, kOdd, t)), y = transposedOn(place, 26, t);
               const auto chain = T::where((T::lazy(x) * 2.0).gt(T::lazy(y)), (T::lazy(x) - T::lazy(y)).abs().sqrt(),
                                           T::lazy(y).cast(DType::F32).tanh()) +
                                  0.5;
               add(out, label(t, kOdd, "eval"), [&] { return chain.eval(); });
               const auto into = place(T::zeros(kOdd, chain.dtype()));
               chain.evalInto(into);
               add(out, label(t, kOdd, "evalInto"), [&] { return into; });
             }
           }}};
}

// Reductions over a row, a column and everything, of an odd shape and a transposed view, and
// rows of 4097 (two of the 4096-value chunks of docs/tensor.md's order).
OpRow reductionRow(const std::string& name, Tolerance gpu, std::vector<DType> dtypes,
                   std::function<T::Tensor(const T::Tensor&, int64_t axis)> reduce) {
  return {{"tensor::" + name}, gpu, [dtypes, reduce](const Place& place, Outputs& out) {
            for (DType t : dtypes) {
              const auto x = place(values(27, {9, 37}, t)), xt = place(values(28, {37, 9}, t)).transpose(0, 1);
              for (int64_t axis : {-1, 0, 1}) {
                const std::string over = axis < 0 ? "all" : "axis " + std::to_string(axis);
                add(out, label(t, {9, 37}, over), [&] { return reduce(x, axis); });
                add(out, label(t, {9, 37}, "transposed, " + over), [&] { return reduce(xt, axis); });
              }
              const auto wide = place(values(29, {2, 4097}, t));
              add(out, label(t, {2, 4097}, "axis 1"), [&] { return reduce(wide, 1); });
            }
          }};
}

std::vector<OpRow> reductionRows() {
  const std::vector<DType> all = {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I8, DType::Bool};
  const std::vector<DType> floats = {DType::F32, DType::BF16};
  auto axes = [](int64_t axis) { return axis < 0 ? T::Axes{} : T::Axes{axis}; };
  return {
      reductionRow("sum", kBits, all, [axes](const T::Tensor& x, int64_t a) { return x.sum(axes(a)); }),
      reductionRow("mean", kBits, all, [axes](const T::Tensor& x, int64_t a) { return x.mean(axes(a), true); }),
      reductionRow("max", kBits, all, [axes](const T::Tensor& x, int64_t a) { return x.max(axes(a)); }),
      reductionRow("min", kBits, all, [axes](const T::Tensor& x, int64_t a) { return x.min(axes(a)); }),
      reductionRow("prod", kBits, all, [axes](const T::Tensor& x, int64_t a) { return x.prod(axes(a)); }),
      reductionRow("variance", kBits, all,
                   [axes](const T::Tensor& x, int64_t a) { return x.variance(axes(a), false, 1); }),
      reductionRow("argmax", kBits, all, [](const T::Tensor& x, int64_t a) { return x.argmax(a < 0 ? 1 : a); }),
      reductionRow("argmin", kBits, all, [](const T::Tensor& x, int64_t a) { return x.argmin(a < 0 ? 1 : a, true); }),
      reductionRow("cumsum", kBits, all, [](const T::Tensor& x, int64_t a) { return x.cumsum(a < 0 ? 1 : a); }),
      // exp's 2 ulps on each term, then the sum's: a few ulps of the largest probability.
      reductionRow("softmax", ulps(4, 1.0 / 64), floats,
                   [](const T::Tensor& x, int64_t a) { return x.softmax(a < 0 ? 1 : a); }),
      reductionRow("logSoftmax", ulps(4, 1), floats,
                   [](const T::Tensor& x, int64_t a) { return x.logSoftmax(a < 0 ? 1 : a); }),
  };
}

std::vector<OpRow> matmulRows() {
  return {
      {{"tensor::matmul"},
       kBits,
       [](const Place& place, Outputs& out) {
         for (DType t : {DType::F32, DType::I32, DType::I64}) {
           const auto a = place(values(29, {2, 7, 33}, t)), b = place(values(30, {33, 5}, t));
           add(out, label(t, {2, 7, 33}, "batched"), [&] { return a.matmul(b); });
           add(out, label(t, {33, 7}, "transposed operand"), [&] { return a.transpose(1, 2).matmul(a); });
           add(out, label(t, {33}, "matrix-vector"),
               [&] { return T::matmul(b.transpose(0, 1), place(values(31, {33}, t))); });
         }
         // K = 300: past the fma chains' blocks of 256.
         const auto a = place(finite(34, {7, 300})), b = place(finite(35, {300, 5}));
         add(out, "f32 [7, 300] x [300, 5]", [&] { return a.matmul(b); });
       }},
      // Two BF16 or F16 operands run on the tensor cores (f32 accumulation in the hardware's
      // order, one rounding at the end): a couple of ulps of the sum's scale, sqrt(33) ~ 6.
      {{"tensor::matmul"},
       ulps(2, 6),
       [](const Place& place, Outputs& out) {
         for (DType t : {DType::BF16, DType::F16}) {
           const auto a = place(finite(32, {19, 33}, 1.0, t)), b = place(finite(33, {5, 33}, 1.0, t));
           add(out, label(t, {19, 33}, "tensor cores, transposed operand"),
               [&] { return a.matmul(b.transpose(0, 1)); });
         }
       },
       true},
      // Exact integer sums: the INT8 matrix cores on sm_80+, a plain loop below, the CPU's VNNI.
      {{"tensor::intMatmul"},
       kBits,
       [](const Place& place, Outputs& out) {
         const auto a = place(values(36, {37, 70}, DType::I8)), w = place(values(37, {29, 70}, DType::I8));
         add(out, "i8 [37, 70] x the rows of [29, 70]", [&] { return T::intMatmul(a, w.transpose(0, 1)); });
         const auto b = place(values(38, {70, 29}, DType::I8));
         add(out, "i8 [37, 70] x [70, 29]", [&] { return T::intMatmul(a, b); });
       },
       true},
  };
}

}  // namespace

std::vector<OpRow> tensorRows() {
  std::vector<OpRow> rows;
  for (auto part : {unaryRows(), binaryRows(), shapeRows(), lazyRows(), reductionRows(), matmulRows()})
    rows.insert(rows.end(), part.begin(), part.end());
  return rows;
}

}  // namespace gizml::test::ops
