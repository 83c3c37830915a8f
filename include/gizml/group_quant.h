#pragma once
// Our weight format (docs/format.md): each row of a matrix in groups of `group` values along the
// input dimension; a group is one block of 2 + group*bits/8 bytes: a scale exponent e, a zero
// point code z, then the codes q (bits each, a little-endian bit stream). A value is
//   s * (q - z * (2^bits - 1) / 255),  s = base * 2^((e - 255) / 32),
// with `base` one float per tensor. e and z of each group are chosen to minimise the group's
// squared error. QuantizedMatrix multiplies such rows with f32 activations as a converted
// model's linear layers do.
#include <cstdint>
#include <memory>
#include <vector>

namespace gizml::llm {

struct GroupFormat {
  int bits = 4;        // 2..8
  int64_t group = 32;  // a multiple of 8, up to 256
};

/// Bytes of `cols` values (cols a multiple of the group).
int64_t groupRowBytes(const GroupFormat& f, int64_t cols);

/// Quantizes rows x cols values (row-major; cols a multiple of the group) into dst
/// (rows * groupRowBytes bytes) in parallel, and returns the tensor's base. Throws gizml::Error
/// for a format outside the ranges above.
float quantizeGroups(const GroupFormat& f, const float* src, int64_t rows, int64_t cols, uint8_t* dst);
/// The inverse: rows x cols values from src.
void dequantizeGroups(const GroupFormat& f, float base, const uint8_t* src, int64_t rows, int64_t cols,
                      float* dst);

/// A [rows, cols] matrix in the group format, repacked once for this CPU's int8 kernels (docs/
/// architecture.md, "CPU kernels and dispatch"): the product a converted model's linear layers
/// run.
class QuantizedMatrix {
 public:
  /// The rows at `data` (rows * groupRowBytes(f, cols) bytes, as quantizeGroups writes them with
  /// `base`). Where readsSource() says so, products read them in place: they must outlive the
  /// matrix. Throws gizml::Error for a format outside the ranges above or cols not whole groups.
  QuantizedMatrix(const GroupFormat& f, float base, const uint8_t* data, int64_t rows, int64_t cols);
  QuantizedMatrix(QuantizedMatrix&&) noexcept;
  QuantizedMatrix& operator=(QuantizedMatrix&&) noexcept;
  ~QuantizedMatrix();

  int64_t rows() const;
  int64_t cols() const;
  /// Whether products read the rows at `data` (a CPU without AVX2, or a format its panels do not
  /// serve). Otherwise the matrix holds its own repacked copy, and those bytes are not read again.
  bool readsSource() const;
  /// y [n, rows] = x [n, cols] W^T: x's rows quantized to int8 codes per group (a scale a group,
  /// symmetric), then integer dot products with the codes and one scale and zero-point step per
  /// group (the order of cpu/quant_dot.h, the same bits on every CPU), in parallel on the thread
  /// pool. Each row's outputs do not depend on the other rows.
  void matmul(const float* x, int64_t n, float* y) const;

 private:
  struct Kernel;  // the repacked matrix (src/llm/quant/quantized_matrix.cpp)
  std::unique_ptr<const Kernel> kernel_;
  friend void matmulAll(const std::vector<const QuantizedMatrix*>& matrices, const float* x, int64_t n,
                        const std::vector<float*>& ys);
};

/// ys[i] [n, rows of matrices[i]] = x [n, cols] W_i^T for matrices that read the same activations
/// (a layer's q, k and v projections): x's rows quantized once, then one parallel pass over all
/// the matrices. Each ys[i] holds the bits matrices[i]->matmul(x, n, ys[i]) gives. Throws
/// gizml::Error unless there is one output a matrix and every matrix has the same cols and group.
void matmulAll(const std::vector<const QuantizedMatrix*>& matrices, const float* x, int64_t n,
               const std::vector<float*>& ys);

}  // namespace gizml::llm
