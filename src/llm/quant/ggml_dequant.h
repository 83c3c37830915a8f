#pragma once
// ggml block formats to f32, bit-identical to gguf-py's numpy reference (gguf.quants.dequantize)
// and to ggml's dequantize_row_* (Q8_K, which gguf-py lacks).
#include <cstdint>

#include "llm/quant/ggml_types.h"

namespace gizml::llm {

/// Whether dequantize handles the type: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
/// Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
bool canDequantize(GgmlType type);

/// Converts `count` values (a multiple of the type's block size) stored at src (count / blockSize
/// * typeSize bytes, any alignment) into dst. Throws gizml::Error for other types or counts.
void dequantize(GgmlType type, const uint8_t* src, float* dst, int64_t count);

}  // namespace gizml::llm
