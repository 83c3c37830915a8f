#include "cpu/layer_rows.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/elementwise.h"
#include "cpu/reduce.h"

namespace gizml::cpu {
void forEachRow(int64_t rows, int64_t width, FunctionRef<void(int64_t, int64_t)> body) {
  constexpr int64_t kFloatsPerPart = 16384;
  core::parallelFor(rows, std::max<int64_t>(1, kFloatsPerPart / std::max<int64_t>(1, width)), body);
}

namespace {

// The rotation's cosines and sines at `position` (or pair i at positions[i]), once for a row's
// query and key heads (libm's sin and cos in double: their pair per frequency was half of the
// rotation's cost).
void angles(const float* invFreq, int64_t half, int64_t position, const int32_t* positions, float* cs) {
  for (int64_t i = 0; i < half; ++i) {
    const auto at = static_cast<float>(positions ? positions[i] : position);
    const double angle = static_cast<double>(at * invFreq[i]);
    cs[i] = static_cast<float>(std::cos(angle));
    cs[half + i] = static_cast<float>(std::sin(angle));
  }
}

// The cosines and sines of rows [start, start + rows) (row r's at cs + r * 2 half) for one
// frequency table. Every layer of a pass turns the same positions by one of the model's one or
// two tables (Gemma 3's local and global layers), and libm's pairs, made again each layer, were
// 1-2 % of a small model's decode step. The calling thread keeps the tables it made last, known
// by their frequencies' values (not their address, which a later model may reuse): two of a
// prompt's passes (up to a few hundred KiB each), and 32 of a few rows (a batch's sequences each
// decode at their own positions, with one or two tables).
struct AngleTable {
  std::vector<float> invFreq;
  int64_t start = -1, rows = 0;
  uint64_t used = 0;  // when it was last asked for
  std::vector<float> cs;
};

template <size_t N>
struct RecentTables {
  std::array<AngleTable, N> tables;
  uint64_t clock = 0;

  AngleTable& of(const float* invFreq, int64_t half, int64_t start, int64_t rows, bool& found) {
    AngleTable* oldest = &tables[0];
    for (AngleTable& t : tables) {
      if (t.start == start && t.rows == rows && std::equal(invFreq, invFreq + half, t.invFreq.begin(), t.invFreq.end())) {
        found = true;
        t.used = ++clock;
        return t;
      }
      if (t.used < oldest->used) oldest = &t;
    }
    found = false;
    oldest->used = ++clock;
    return *oldest;
  }
};

const float* anglesOfRows(const float* invFreq, int64_t half, int64_t start, int64_t rows) {
  constexpr int64_t kFewRows = 8;
  thread_local RecentTables<2> passes;
  thread_local RecentTables<32> steps;
  bool found = false;
  AngleTable& t = rows > kFewRows ? passes.of(invFreq, half, start, rows, found) : steps.of(invFreq, half, start, rows, found);
  if (found) return t.cs.data();
  t.invFreq.assign(invFreq, invFreq + half);
  t.start = start;
  t.rows = rows;
  t.cs.resize(static_cast<size_t>(rows * 2 * half));
  forEachRow(rows, 2 * half, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) angles(invFreq, half, start + r, nullptr, t.cs.data() + r * 2 * half);
  });
  return t.cs.data();
}

void rotate(float* x, int64_t heads, int64_t headDim, const float* cs, int64_t half) {
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * headDim;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cs[i], s = cs[half + i], a = v[i], b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
}

}  // namespace

void rmsNormRows(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* out) {
  forEachRow(rows, dim, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* in = x + r * dim;
      // In vector lanes (reduce.h's order): one chain of dim adds was most of a decode step's norm.
      const float sum = reduceF32(ReduceOp::SumSquaredDiff, in, dim);
      const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
      for (int64_t i = 0; i < dim; ++i) out[r * dim + i] = in[i] * inv * w[i];
    }
  });
}

void ropeRows(float* q, int64_t qHeads, float* k, int64_t kHeads, int64_t rows, int64_t headDim,
              const float* invFreq, int64_t half, int64_t start, const int32_t* positions) {
  const int64_t qWidth = qHeads * headDim, kWidth = kHeads * headDim;
  const float* table = positions ? nullptr : anglesOfRows(invFreq, half, start, rows);
  forEachRow(rows, qWidth + kWidth, [&](int64_t r0, int64_t r1) {
    thread_local std::vector<float> own;  // a row's at explicit positions
    own.resize(static_cast<size_t>(2 * half));
    for (int64_t r = r0; r < r1; ++r) {
      const float* cs = table ? table + r * 2 * half : own.data();
      if (!table) angles(invFreq, half, start + r, positions + r * half, own.data());
      rotate(q + r * qWidth, qHeads, headDim, cs, half);
      rotate(k + r * kWidth, kHeads, headDim, cs, half);
    }
  });
}

void addRows(float* x, const float* y, int64_t n) {
  forEachRow(n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] += y[i];
  });
}

void gatedActivation(float* gate, const float* up, int64_t n, GateActivation act) {
  // Through the vectorised elementwise kernels.
  const tensor::UnaryOp op = act == GateActivation::Silu ? tensor::UnaryOp::Silu : tensor::UnaryOp::GeluTanh;
  forEachRow(n, 1, [&](int64_t i0, int64_t i1) {
    unaryF32(op, gate + i0, gate + i0, i1 - i0);
    binaryF32(tensor::BinaryOp::Mul, gate + i0, up + i0, gate + i0, i1 - i0);
  });
}

void sigmoidGate(float* x, const float* gate, int64_t n) {
  forEachRow(n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
  });
}

void softcap(float* x, int64_t n, float cap) {
  forEachRow(n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] = cap * std::tanh(x[i] / cap);
  });
}

void scaleRows(float* x, int64_t n, float s) {
  forEachRow(n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] *= s;
  });
}

void splitRuns(const float* both, int64_t runs, int64_t width, float* first, float* second) {
  forEachRow(runs, 2 * width, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* from = both + r * 2 * width;
      std::copy(from, from + width, first + r * width);
      std::copy(from + width, from + 2 * width, second + r * width);
    }
  });
}

void gatherRows(const float* x, const int64_t* ids, int64_t count, int64_t width, float* out) {
  for (int64_t i = 0; i < count; ++i) std::copy(x + ids[i] * width, x + (ids[i] + 1) * width, out + i * width);
}

void zeroRows(float* x, int64_t n) { std::fill(x, x + n, 0.0f); }

}  // namespace gizml::cpu
