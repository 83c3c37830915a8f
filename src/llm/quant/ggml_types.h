#pragma once
// ggml's tensor element types as GGUF files number them (llama.cpp ggml.h, gguf-py constants.py):
// each stores blockSize values in typeSize bytes.
#include <cstdint>
#include <string>

namespace gizml::llm {

/// Values per K-quant super-block (Q2_K .. Q6_K).
inline constexpr int kKQuantBlock = 256;

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};

struct GgmlTypeTraits {
  const char* name;
  int64_t blockSize;  // values per block
  int64_t typeSize;   // bytes per block
};

/// The traits of a type id read from a file, or nullptr when the id is unknown (or retired).
const GgmlTypeTraits* ggmlTypeTraits(uint32_t id);
/// The same for a known type; throws gizml::Error for an id outside the table.
const GgmlTypeTraits& ggmlTraits(GgmlType type);
/// "Q4_K", or "type 123" for unknown ids.
std::string ggmlTypeName(uint32_t id);

}  // namespace gizml::llm
