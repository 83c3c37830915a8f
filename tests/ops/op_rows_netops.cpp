// The rows of include/gizml/netops.h and netops_rows.h. Tolerances on a GPU follow docs/netops.md:
// the host's bits where the GPU takes the host's steps; groupNorm within 1e-5 (1 + |y|) (84 f32
// ulps at 1); the attention rows within a BF16 ulp of the largest output (the plain kernel: the
// GPU's expf and the output's BF16 rounding) or two (tensor cores). Where a GPU result has another
// dtype than the host's (BF16 rows, I8 codes), the host's result rounded once to it is the reference.
#include <gizml/netops.h>

#include <cmath>

#include "ops/op_table.h"

namespace gizml::test::ops {
namespace {

namespace N = gizml::netops;

T::Tensor ints(const std::vector<int64_t>& v) {
  return T::tensor({static_cast<int64_t>(v.size())}, std::vector<double>(v.begin(), v.end()), DType::I64);
}

std::vector<int64_t> labelsFor(int64_t rows, int64_t classes) {
  std::vector<int64_t> labels;
  for (int64_t r = 0; r < rows; ++r) labels.push_back((r * 31) % classes);
  return labels;
}

// The modulation operands of the modulated norms for x [rows, width]: w, shift and scale of 3
// rows, and a map cycling through them.
struct Modulation {
  T::Tensor w, shift, scale, map;
};
Modulation modulation(const Place& place, int64_t rows, int64_t width, uint64_t seed) {
  std::vector<double> map;
  for (int64_t r = 0; r < rows; ++r) map.push_back(static_cast<double>((r * 2) % 3));
  return {place(finite(seed, {width}, 0.5).add(T::scalar(1.0))), place(finite(seed + 1, {3, width}, 0.3)),
          place(finite(seed + 2, {3, width}, 0.2)), place(T::tensor({rows}, map))};
}

std::vector<OpRow> denseRows() {
  std::vector<OpRow> rows;
  rows.push_back(
      {{"netops::affine"}, kBits, [](const Place& place, Outputs& out) {
         const auto x = place(finite(1, {13, 70})), w = place(finite(2, {33, 70}, 0.2)), b = place(finite(3, {33}));
         add(out, "f32 products", [&] { return N::affine(x, w, b, DType::F32); });
         add(out, "transposed x", [&] { return N::affine(place(finite(4, {70, 13})).transpose(0, 1), w, b); });
       }});
  rows.push_back(
      {{"netops::layerNorm", "netops::layerNormGrad"}, kBits, [](const Place& place, Outputs& out) {
         const auto x = place(finite(5, {3, 7, 45}, 4.0)), w = place(finite(6, {45})), b = place(finite(7, {45}));
         const auto y = N::layerNorm(x, w, b, 1e-5);
         for (size_t i = 0; i < y.size(); ++i) add(out, "layerNorm " + std::to_string(i), [&] { return y[i]; });
         const auto dx = N::layerNormGrad(place(finite(8, {3, 7, 45})), x, w, y[1], y[2]);
         for (size_t i = 0; i < dx.size(); ++i) add(out, "layerNormGrad " + std::to_string(i), [&] { return dx[i]; });
       }});
  rows.push_back({{"netops::crossEntropyLoss", "netops::crossEntropyRows", "netops::crossEntropyGrad"},
                  kBits,
                  [](const Place& place, Outputs& out) {
                    for (int64_t classes : {1, 5, 77, 4099}) {
                      const auto logits = place(finite(9, {9, classes}, 8.0));
                      const auto labels = labelsFor(9, classes);
                      const std::string c = std::to_string(classes) + " classes";
                      add(out, "loss, " + c,
                          [&] { return T::scalar(N::crossEntropyLoss(logits, labels), DType::F64); });
                      add(out, "rows, " + c, [&] { return N::crossEntropyRows(logits, labels); });
                      add(out, "grad, " + c, [&] { return N::crossEntropyGrad(logits, labels, 0.25); });
                    }
                  }});
  rows.push_back({{"netops::attention"}, kBits, [](const Place& place, Outputs& out) {
                    struct Case {
                      int64_t b, tq, tk, d, e;
                      bool causal;
                      double rate;
                    };
                    for (const Case& s : {Case{2, 5, 40, 12, 7, false, 0.0}, Case{1, 33, 33, 8, 20, true, 0.0},
                                          Case{2, 4, 21, 8, 5, true, 0.3}, Case{1, 70, 70, 64, 64, false, 0.1}}) {
                      const auto q = place(finite(10, {s.b, s.tq, s.d})), k = place(finite(11, {s.b, s.tk, s.d}));
                      const auto v = place(finite(12, {s.b, s.tk, s.e}));
                      add(out, "tq " + std::to_string(s.tq) + " tk " + std::to_string(s.tk),
                          [&] { return N::attention(q, k, v, 0.125, s.causal, s.rate, T::Key(17)); });
                    }
                  }});
  rows.push_back(
      {{"netops::dropout"}, kBits, [](const Place& place, Outputs& out) {
         add(out, "f32 [37, 101]", [&] { return N::dropout(place(finite(13, {37, 101})), T::Key(10), 0.35); });
       }});
  rows.push_back({{"netops::argmax"}, kBits, [](const Place& place, Outputs& out) {
                    auto x = finite(14, {6, 33});
                    x = T::where(x.gt(T::scalar(1.5)), T::scalar(NAN), x);  // NaN never wins
                    add(out, "f32 with NaN", [&] { return ints(N::argmax(place(x))); });
                  }});
  // Within 1e-5 (1 + |y|): the GPU adds each group's slices in f64, the host all in f64.
  rows.push_back(
      {{"netops::groupNorm"}, ulps(84, 1), [](const Place& place, Outputs& out) {
         const auto x = place(finite(15, {6, 5, 7}, 3.0)), w = place(finite(16, {6})), b = place(finite(17, {6}));
         for (bool act : {false, true})
           add(out, act ? "with SiLU" : "plain", [&] { return N::groupNorm(x, 2, w, b, 1e-5, act); });
       }});
  return rows;
}

std::vector<OpRow> convolutionRows() {
  std::vector<OpRow> rows;
  rows.push_back({{"netops::im2col", "netops::col2im"}, kBits, [](const Place& place, Outputs& out) {
                    const auto x = place(finite(20, {2, 3, 7, 5}));
                    add(out, "im2col 3x2 stride 2 pad 1", [&] { return N::im2col(x, 3, 2, 2, 1); });
                    add(out, "im2col of a transposed view", [&] { return N::im2col(x.transpose(2, 3), 2, 2, 1, 0); });
                    add(out, "col2im", [&] {
                      return N::col2im(place(finite(21, {2 * 4 * 3, 3 * 3 * 2})), 2, 3, 7, 5, 3, 2, 2, 1);
                    });
                  }});
  rows.push_back({{"netops::im2col1d", "netops::col2im1d"}, kBits, [](const Place& place, Outputs& out) {
                    const auto x = place(finite(22, {11, 3}));
                    add(out, "im2col1d k 3 stride 2 pad 1 dilation 2", [&] { return N::im2col1d(x, 3, 2, 1, 2); });
                    add(out, "im2col1d rows 1..3", [&] { return N::im2col1d(x, 3, 1, 1, 1, 1, 3); });
                    add(out, "col2im1d", [&] { return N::col2im1d(place(finite(23, {6, 3 * 3})), 3, 11, 3, 2, 1); });
                  }});
  rows.push_back(
      {{"netops::conv1d", "netops::convTranspose1d"}, kBits, [](const Place& place, Outputs& out) {
         const auto x = place(finite(24, {13, 3})), w = place(finite(25, {4, 3, 3})), b = place(finite(26, {4}));
         add(out, "conv1d with bias", [&] { return N::conv1d(x, w, {b}, 2, 1, 2); });
         add(out, "conv1d", [&] { return N::conv1d(x, w, {}, 1, 0, 1); });
         const auto wt = place(finite(27, {3, 4, 3}));
         add(out, "convTranspose1d with bias", [&] { return N::convTranspose1d(x, wt, {b}, 2, 1); });
       }});
  rows.push_back({{"netops::pool2d", "netops::pool2dGrad"}, kBits, [](const Place& place, Outputs& out) {
                    const auto x = place(finite(28, {2, 3, 7, 9})), dy = place(finite(29, {2, 3, 3, 4}));
                    for (bool average : {false, true}) {
                      const std::string kind = average ? "average" : "max";
                      add(out, kind, [&] { return N::pool2d(x, 3, 2, average); });
                      add(out, kind + " gradient", [&] { return N::pool2dGrad(dy, x, 3, 2, average); });
                    }
                  }});
  rows.push_back({{"netops::patchRows"}, kBits, [](const Place& place, Outputs& out) {
                    const auto x = place(finite(30, {3, 7, 9}));
                    for (DType t : {DType::F32, DType::BF16, DType::F16})
                      add(out, label(t, {3, 7, 9}, "rows 1..6"), [&] { return N::patchRows(x, 3, 3, 1, 1, 6, t); });
                  }});
  // F32 products: the host's bits (compute BF16's bound is checked in tests/netops/conv_gpu_test.cpp).
  rows.push_back(
      {{"netops::lazyConv", "netops::lazyConv3"}, kBits, [](const Place& place, Outputs& out) {
         const auto x = place(finite(31, {4, 9, 11})), w = place(finite(32, {6, 4 * 3 * 3}));
         const auto b = place(finite(33, {6, 1}));
         add(out, "3x3 pad 1, + bias, relu",
             [&] { return (N::lazyConv(w, x, 3, 3, 1, DType::F32) + T::lazy(b)).relu().eval(); });
         // Width 7: a lazyConv a frame in F32 everywhere.
         const auto x3 = place(finite(34, {5, 2, 5, 7}, 1.0, DType::BF16)), w3 = place(finite(35, {9, 27 * 2}));
         add(out, "3x3x3 width 7", [&] { return N::lazyConv3(w3, x3).eval(); });
       }});
  return rows;
}

std::vector<OpRow> normRows() {
  std::vector<OpRow> rows;
  rows.push_back({{"netops::pixelNormInto"}, kBits, [](const Place& place, Outputs& out) {
                    for (DType t : {DType::F32, DType::BF16})
                      for (bool act : {false, true}) {
                        // x a transposed view, odd channel and pixel counts.
                        const auto x = place(finite(40, {2, 37, 5}, 2.0, t)).transpose(1, 2);
                        const auto y = place(T::zeros({2, 5, 37}, t));
                        N::pixelNormInto(x, 1e-6, act, y);
                        add(out, label(t, {2, 5, 37}, act ? "with SiLU" : "plain"), [&] { return y; });
                      }
                  }});
  rows.push_back({{"netops::modulatedNorm", "netops::modulatedNormInto"}, kBits, [](const Place& place, Outputs& out) {
                    const int64_t rows = 7, width = 96;
                    const auto x = place(finite(41, {rows, width}, 3.0));
                    const auto m = modulation(place, rows, width, 42);
                    for (bool centered : {false, true}) {
                      const std::string kind = centered ? "centered" : "rms";
                      add(out, kind, [&] { return N::modulatedNorm(x, m.w, m.shift, m.scale, m.map, 1e-6, centered); });
                      const auto y = place(T::zeros({rows, width}));
                      N::modulatedNormInto(x, m.w, m.shift, m.scale, m.map, 1e-6, y, centered);
                      add(out, kind + " into f32", [&] { return y; });
                    }
                  }});
  rows.push_back({{"netops::gatedNormAddInto"}, kBits, [](const Place& place, Outputs& out) {
                    const int64_t rows = 5, width = 77;
                    const auto x = place(finite(43, {rows, width})), y = place(finite(44, {rows, width}, 4.0));
                    const auto m = modulation(place, rows, width, 45);
                    N::gatedNormAddInto(x, y, m.w, m.shift, m.map, 1e-5);
                    add(out, "f32 [5, 77]", [&] { return x; });
                  }});
  rows.push_back({{"netops::int8Rows", "netops::int8RowsInto", "netops::modulatedInt8RowsInto"},
                  kBits,
                  [](const Place& place, Outputs& out) {
                    const int64_t rows = 3, width = 512;
                    // Full 24-bit mantissas: nearly every addition of the rotation rounds.
                    const auto x = place(T::normal(T::Key(46), {rows, width}, 0.0, 2.0));
                    for (int64_t bits : {8, 4}) {
                      const std::string b = std::to_string(bits) + " bits";
                      const auto qs = N::int8Rows(x, bits);
                      add(out, "q, " + b, [&] { return qs.at(0); });
                      add(out, "s, " + b, [&] { return qs.at(1); });
                      const auto q = place(T::zeros({rows, width})), s = place(T::zeros({rows, 1}));
                      N::int8RowsInto(x, q, s, bits);
                      add(out, "into f32 q, " + b, [&] { return q; });
                      add(out, "into s, " + b, [&] { return s; });
                      const auto m = modulation(place, rows, width, 47);
                      const auto mq = place(T::zeros({rows, width}, DType::I8)), ms = place(T::zeros({rows, 1}));
                      const auto my = place(T::zeros({rows, width}));
                      N::modulatedInt8RowsInto(x, m.w, m.shift, m.scale, m.map, 1e-6, my, mq, ms, true, bits);
                      add(out, "modulated q, " + b, [&] { return mq; });
                      add(out, "modulated s, " + b, [&] { return ms; });
                      add(out, "modulated y, " + b, [&] { return my; });
                    }
                  }});
  rows.push_back({{"netops::w4a8Grid"},
                  kBits,
                  [](const Place& place, Outputs& out) {
                    // Scales up to about 40: levels times them pass 127 (the clamp) and halves.
                    const auto packed = place(values(48, {13, 48}, DType::I8));
                    const auto scales = place(finite(49, {13, 6}, 8.0).abs().add(T::scalar(0.5)));
                    const auto levels = place(finite(50, {16}, 4.0));
                    add(out, "i8 [13, 48], groups of 16", [&] { return N::w4a8Grid(packed, scales, levels, 16); });
                  }});
  return rows;
}

// The attention of a transformer's rows: the GPU's BF16 path against the host's F32 on the same
// BF16 values.
std::vector<OpRow> attentionRowsRows() {
  std::vector<OpRow> rows;
  auto qkvFor = [](const Place& place, uint64_t seed, const T::Shape& shape) {
    const auto x = finite(seed, shape, 1.5, DType::BF16);
    return place(place.gpu ? x : x.cast(DType::F32));
  };
  auto outFor = [](const Place& place, const T::Shape& shape) {
    return place(T::zeros(shape, place.gpu ? DType::BF16 : DType::F32));
  };
  // Heads of 32 and 48: the plain kernel everywhere, the host's steps in its order.
  rows.push_back(
      {{"netops::attendedRows", "netops::attentionRows"}, ulpsOfMax(1), [qkvFor](const Place& place, Outputs& out) {
         const auto qkv = qkvFor(place, 50, {45, 3 * 2 * 32});
         add(out, "2 heads of 32, groups of 20", [&] { return N::attendedRows(qkv, 2, 32, false, 20); });
         add(out, "30 queries", [&] { return N::attendedRows(qkv, 2, 32, false, 0, {}, 30); });
       }});
  // Heads of 64: tensor cores on NVIDIA sm_80+.
  rows.push_back({{"netops::attendedRows"},
                  ulpsOfMax(2),
                  [qkvFor](const Place& place, Outputs& out) {
                    const auto qkv = qkvFor(place, 51, {70, 3 * 64});
                    add(out, "1 head of 64", [&] { return N::attendedRows(qkv, 1, 64, false, 0); });
                  },
                  true});
  rows.push_back({{"netops::crossAttentionRows"}, ulpsOfMax(1), [qkvFor, outFor](const Place& place, Outputs& out) {
                    const auto q = qkvFor(place, 52, {13, 2 * 48}), kv = qkvFor(place, 53, {9, 2 * 2 * 48});
                    const auto y = outFor(place, {13, 2 * 48});
                    N::crossAttentionRows(q, kv, 2, 48, y);
                    add(out, "2 heads of 48", [&] { return y; });
                  }});
  rows.push_back(
      {{"netops::neighborhood3d"}, ulpsOfMax(1), [qkvFor](const Place& place, Outputs& out) {
         const auto qkv = qkvFor(place, 54, {3 * 4 * 5, 3 * 2 * 16});
         add(out, "grid 3x4x5, kernel 3x3x3", [&] { return N::neighborhood3d(qkv, {3, 4, 5}, {3, 3, 3}, 2, 0.25); });
       }});
  // In place on q and k, in f32, rounded once: the host's bits (rounded to BF16 on a GPU).
  rows.push_back({{"netops::headPrepInPlace"}, kBits, [qkvFor](const Place& place, Outputs& out) {
                    const int64_t n = 13, heads = 2, head = 32, row0 = 5, half = 16;
                    const auto qkv = qkvFor(place, 55, {20, 3 * heads * head});
                    N::HeadPrep p;
                    p.qw = place(T::normal(T::Key(56), {head}, 1.0, 0.2));
                    p.kw = place(T::normal(T::Key(57), {head}, 1.0, 0.2));
                    const auto angle = T::normal(T::Key(58), {row0 + n, half}, 0.0, 2.0);
                    p.cos = place(angle.cos());
                    p.sin = place(angle.sin());
                    N::headPrepInPlace(qkv, n, heads, head, p, row0);
                    add(out, "2 heads of 32, rows 5..18", [&] { return qkv; });
                  }});
  return rows;
}

}  // namespace

std::vector<OpRow> netopsRows() {
  std::vector<OpRow> rows;
  for (auto part : {denseRows(), convolutionRows(), normRows(), attentionRowsRows()})
    rows.insert(rows.end(), part.begin(), part.end());
  return rows;
}

}  // namespace gizml::test::ops
