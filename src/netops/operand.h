#pragma once
// The checks every netops function makes on its operands, with errors that name the function
// and the argument ("netops::attention: q of shape [2, 3] must be [b, tq, d]").
#include <gizml/netops.h>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace gizml::netops::detail {

/// "netops::<fn>: ": the prefix of every message.
std::string where(const char* fn);

/// The operand as a contiguous F32 tensor where it is (an Error naming it unless a float type
/// other than F64: the operations that compute in f64 check for it first, see anyF64).
Tensor floatOperand(const char* fn, const char* arg, const Tensor& t);

/// Whether any operand is F64: then the operations that support it compute in f64 (hostF64).
bool anyF64(std::initializer_list<const Tensor*> operands);

/// The operand as a contiguous F64 tensor on the host (an Error unless a float type on the host).
Tensor hostF64(const char* fn, const char* arg, const Tensor& t);

/// The operand as a contiguous F32 tensor on the host (itself when it already is one). A GPU
/// operand is an Error naming the function: no GPU kernel yet and no hidden copy to the host.
Tensor hostF32(const char* fn, const char* arg, const Tensor& t);

/// An Error unless t has `rank` axes; `layout` names them in the message ("[n, c, h, w]").
void requireRank(const char* fn, const char* arg, const Tensor& t, int64_t rank, const char* layout);

/// An Error unless t's shape is `shape`.
void requireShape(const char* fn, const char* arg, const Tensor& t, const tensor::Shape& shape);

/// An Error unless value >= minimum.
void requireAtLeast(const char* fn, const char* arg, int64_t value, int64_t minimum);

/// An Error unless every label lies in [0, classes) and there is one per row.
void requireLabels(const char* fn, const std::vector<int64_t>& labels, int64_t rows, int64_t classes);

}  // namespace gizml::netops::detail
