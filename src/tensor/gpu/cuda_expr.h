#pragma once
// The CUDA C++ text of elementwise operations, shared by the Lazy kernel generator
// (codegen_elementwise.cpp) and Tile::cuda (src/tile/cuda_codegen.cpp) so that both compute what
// the CPU does (src/cpu/elementwise_simd.cpp). f32 text works on the f32 working value of
// F32/F16/BF16/Bool, i64 text on the integer dtypes; the helpers it calls are in
// elementwiseMathSource(), which a generated source includes once.
#include <gizml/tensor.h>

#include <string>

namespace gizml::gpuops {

/// The types, dtype conversions and __device__ helpers of the text below (include-guarded).
const std::string& elementwiseMathSource();

/// A working f32 value rounded to what dtype t holds.
std::string roundF32(gizml::DType t, const std::string& x);
std::string unaryF32(gizml::tensor::UnaryOp op, const std::string& x);
/// Comparisons and logic give the f32 0/1 of Bool.
std::string binaryF32(gizml::tensor::BinaryOp op, const std::string& a, const std::string& b);
/// `a` where the f32 condition is nonzero, else `b`.
std::string select(const std::string& cond, const std::string& a, const std::string& b);

/// An i64 value wrapped to integer dtype t.
std::string wrapI64(gizml::DType t, const std::string& x);
std::string unaryI64(gizml::tensor::UnaryOp op, const std::string& x);
std::string binaryI64(gizml::tensor::BinaryOp op, const std::string& a, const std::string& b);
/// Comparisons and logic of i64 operands give the f32 0/1 of Bool.
std::string compareI64(gizml::tensor::BinaryOp op, const std::string& a, const std::string& b);

/// Casts between the f32 working value and integer dtype t, as the CPU casts.
std::string castF32ToInt(gizml::DType t, const std::string& x);
std::string castIntToF32(gizml::DType t, const std::string& x);

}  // namespace gizml::gpuops
