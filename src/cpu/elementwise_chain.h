#pragma once
// A chain of f32 elementwise operations computed in registers: a few SIMD vectors are loaded,
// every link of the chain is applied to them, and they are stored once. Each link's result is
// exactly what the per-operation kernels of elementwise.h give (same vector code per lane).
#include <gizml/ops.h>

#include <cstdint>

namespace gizml::cpu {

/// One link of a chain, applied to the running value v.
struct ChainOp {
  enum class Form : uint8_t {
    Unary,         // op(v)
    Operand,       // v op operands[operand][i]
    OperandFirst,  // operands[operand][i] op v
    Scalar,        // v op scalar
    ScalarFirst,   // scalar op v
    Self,          // v op v
  };
  Form form = Form::Unary;
  uint8_t op = 0;       // a UnaryOp for Form::Unary, else a BinaryOp
  uint32_t operand = 0;  // Operand forms: which of the operand arrays
  float scalar = 0;     // Scalar forms
};

/// Whether an operation can be a link: the vectorised ones whose result is f32 (not Bool).
bool chainsUnary(tensor::UnaryOp op);
bool chainsBinary(tensor::BinaryOp op);

/// The most links one chain may have (longer runs are cut into several chains).
constexpr int64_t kMaxChainLinks = 64;

/// y[i] = the links applied in order to x[i], for i < n (count <= kMaxChainLinks). With `stream` the stores bypass the
/// caches (for a large result not read again soon); call streamFence() before others read y.
void chainF32(const ChainOp* links, int64_t count, const float* x, const float* const* operands, float* y,
              int64_t n, bool stream);
/// Orders this thread's streaming stores before its later stores.
void streamFence();

}  // namespace gizml::cpu
