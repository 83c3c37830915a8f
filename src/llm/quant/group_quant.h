#pragma once
// Our weight format (docs/format.md). The format, quantizing and dequantizing, and the product
// of QuantizedMatrix are public (gizml/group_quant.h); the checks and sizes the converter and
// the layers also use here.
#include <gizml/group_quant.h>

#include <cstdint>

namespace gizml::llm {

/// Checks bits and group; throws gizml::Error naming `what` otherwise.
void checkGroupFormat(const GroupFormat& f, const char* what);
int64_t groupBlockBytes(const GroupFormat& f);
/// The scale of exponent e.
float groupScale(float base, int e);

}  // namespace gizml::llm
