#pragma once
// Elementwise kernels over contiguous f32 runs, vectorised for the best instruction set the CPU
// has (chosen at run time; simdTarget, public in gizml/cpu.h, names it). Bools are f32 0 and 1
// here.
#include <gizml/cpu.h>
#include <gizml/ops.h>

#include <cstdint>

namespace gizml::cpu {

void unaryF32(tensor::UnaryOp op, const float* x, float* y, int64_t n);
/// Arithmetic gives f32 values; comparisons, And and Or give 0 or 1.
void binaryF32(tensor::BinaryOp op, const float* a, const float* b, float* y, int64_t n);
/// binaryF32 with one operand a single value held in a register: y = a op s, or s op a when
/// scalarFirst (a chain's constants cost no memory traffic).
void binaryScalarF32(tensor::BinaryOp op, const float* a, float s, float* y, int64_t n, bool scalarFirst);
/// y = condition != 0 ? a : b
void whereF32(const float* condition, const float* a, const float* b, float* y, int64_t n);

}  // namespace gizml::cpu

namespace gizml::cpu {

/// Wrapping i64 arithmetic without signed-overflow UB (integers wrap, as NumPy's).
inline int64_t wrapAdd(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
inline int64_t wrapSub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
inline int64_t wrapMul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

/// The same operations on i64 values (integers wrap, as NumPy's). Comparisons give 0 or 1.
void unaryI64(tensor::UnaryOp op, const int64_t* x, int64_t* y, int64_t n);
void binaryI64(tensor::BinaryOp op, const int64_t* a, const int64_t* b, int64_t* y, int64_t n);
/// Comparisons and logic of i64 operands into f32 0/1 (the working form of Bool).
void compareI64(tensor::BinaryOp op, const int64_t* a, const int64_t* b, float* y, int64_t n);
void whereI64(const float* condition, const int64_t* a, const int64_t* b, int64_t* y, int64_t n);

/// The same operations on f64 values (F64), scalar loops over libm in double: the rules of
/// docs/tensor.md ("Computation") with every operation done in double. Comparisons give f32 0/1.
void unaryF64(tensor::UnaryOp op, const double* x, double* y, int64_t n);
void binaryF64(tensor::BinaryOp op, const double* a, const double* b, double* y, int64_t n);
void compareF64(tensor::BinaryOp op, const double* a, const double* b, float* y, int64_t n);
void whereF64(const float* condition, const double* a, const double* b, double* y, int64_t n);

}  // namespace gizml::cpu
