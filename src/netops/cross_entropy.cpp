// Softmax cross-entropy: each row's max, then sum exp(x - m) in 16 lanes (value j to lane j % 16
// in increasing j, the lanes combined pairwise: l += l + 8, then + 4, + 2, + 1), so a GPU's 16
// lanes give the same bits (gz_netops_ce_rows and _grad in src/netops/kernels/netops.cu.inc); the
// mean of the rows' losses in f64 in row order, on the host. F64 logits take the same steps in
// f64 with libm's exp and log (on the host only).
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "netops/exp_log.h"
#include "netops/gpu_kernels.h"
#include "netops/operand.h"

namespace gizml::netops {
namespace {

struct RowSoftmax {
  float max, sum;
};

// Compiled also for FMA hardware: gz_exp's fmas are then instructions, not libm calls (the same
// bits either way).
GIZML_FMA_CLONES RowSoftmax rowSoftmax(const float* row, int64_t classes) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < classes; ++j) m = row[j] > m ? row[j] : m;
  float lanes[16] = {};
  int64_t j0 = 0;
  for (; j0 + 16 <= classes; j0 += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += detail::gz_exp(row[j0 + l] - m);
  for (int64_t j = j0; j < classes; ++j) lanes[j - j0] += detail::gz_exp(row[j] - m);
  for (int width = 8; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return {m, lanes[0]};
}

GIZML_FMA_CLONES void softmaxMinusOnehot(const float* row, int64_t classes, int64_t label, float scale,
                                         float* out) {
  const RowSoftmax soft = rowSoftmax(row, classes);
  const float inv = 1.0f / soft.sum;
  for (int64_t j = 0; j < classes; ++j)
    out[j] = (detail::gz_exp(row[j] - soft.max) * inv - (j == label ? 1.0f : 0.0f)) * scale;
}

// The F64 steps: the max, then sum exp(x - m) in the same 16 lanes, in double.
struct RowSoftmaxF64 {
  double max, sum;
};

RowSoftmaxF64 rowSoftmaxF64(const double* row, int64_t classes) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < classes; ++j) m = row[j] > m ? row[j] : m;
  double lanes[16] = {};
  for (int64_t j = 0; j < classes; ++j) lanes[j % 16] += std::exp(row[j] - m);
  for (int width = 8; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return {m, lanes[0]};
}

// The logits as contiguous [rows, classes] where they are, checked with their labels: F32, or
// F64 on the host for F64 logits.
Tensor checkedLogits(const char* fn, const Tensor& logitsIn, const std::vector<int64_t>& labels) {
  const Tensor logits = logitsIn.dtype() == DType::F64 ? detail::hostF64(fn, "logits", logitsIn)
                                                       : detail::floatOperand(fn, "logits", logitsIn);
  detail::requireRank(fn, "logits", logits, 2, "[rows, classes]");
  detail::requireAtLeast(fn, "classes", logits.shape()[1], 1);
  detail::requireLabels(fn, labels, logits.shape()[0], logits.shape()[1]);
  return logits;
}

Tensor rowLosses(const char* fn, const Tensor& logitsIn, const std::vector<int64_t>& labels) {
  const Tensor logits = checkedLogits(fn, logitsIn, labels);
  if (logits.onGpu()) return detail::crossEntropyRowsGpu(logits, labels);
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  if (logits.dtype() == DType::F64) {
    Tensor loss = tensor::empty({rows}, DType::F64);
    const double* px = logits.data<double>();
    double* pl = loss.data<double>();
    for (int64_t r = 0; r < rows; ++r) {
      const double* row = px + r * classes;
      const RowSoftmaxF64 s = rowSoftmaxF64(row, classes);
      pl[r] = s.max + std::log(s.sum) - row[labels[static_cast<size_t>(r)]];
    }
    return loss;
  }
  Tensor loss = tensor::empty({rows});
  const float* px = logits.data<float>();
  float* pl = loss.data<float>();
  core::parallelFor(rows, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = px + r * classes;
      const RowSoftmax s = rowSoftmax(row, classes);
      pl[r] = s.max + detail::gz_log(s.sum) - row[labels[static_cast<size_t>(r)]];
    }
  });
  return loss;
}

}  // namespace

Tensor crossEntropyRows(const Tensor& logits, const std::vector<int64_t>& labels) {
  return rowLosses("crossEntropyRows", logits, labels);
}

double crossEntropyLoss(const Tensor& logits, const std::vector<int64_t>& labels) {
  const Tensor loss = rowLosses("crossEntropyLoss", logits, labels).host();
  check(loss.numel() > 0, detail::where("crossEntropyLoss") + "logits has no rows to average");
  const std::vector<double> pl = loss.toDoubles();  // f32 losses exactly, or F64's
  double total = 0.0;
  for (int64_t r = 0; r < loss.numel(); ++r) total += pl[static_cast<size_t>(r)];
  return total / static_cast<double>(loss.numel());
}

Tensor crossEntropyGrad(const Tensor& logitsIn, const std::vector<int64_t>& labels, double scale) {
  const Tensor logits = checkedLogits("crossEntropyGrad", logitsIn, labels);
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  if (logits.dtype() == DType::F64) {  // (softmax - onehot) scale in f64
    Tensor grad = tensor::empty({rows, classes}, DType::F64);
    const double* px = logits.data<double>();
    double* pg = grad.data<double>();
    for (int64_t r = 0; r < rows; ++r) {
      const double* row = px + r * classes;
      const int64_t label = labels[static_cast<size_t>(r)];
      const RowSoftmaxF64 soft = rowSoftmaxF64(row, classes);
      const double inv = 1.0 / soft.sum;
      for (int64_t j = 0; j < classes; ++j)
        pg[r * classes + j] = (std::exp(row[j] - soft.max) * inv - (j == label ? 1.0 : 0.0)) * scale;
    }
    return grad;
  }
  const float s = static_cast<float>(scale);
  if (logits.onGpu()) return detail::crossEntropyGradGpu(logits, labels, s);
  Tensor grad = tensor::empty({rows, classes});
  const float* px = logits.data<float>();
  float* pg = grad.data<float>();
  core::parallelFor(rows, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      softmaxMinusOnehot(px + r * classes, classes, labels[static_cast<size_t>(r)], s, pg + r * classes);
  });
  return grad;
}

}  // namespace gizml::netops
