#pragma once
// Sizes and decoding of GGUF's scalar value types, shared by the parser and the getters.
#include <cstdint>

#include "llm/formats/gguf.h"

namespace gizml::llm::gguf_detail {

/// Bytes of a fixed-size value type; 0 for String and Array, -1 for unknown ids.
int scalarSize(uint32_t type);
bool isIntegerType(GgufValueType type);
bool isFloatType(GgufValueType type);

}  // namespace gizml::llm::gguf_detail
