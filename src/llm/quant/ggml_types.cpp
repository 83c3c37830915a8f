#include "llm/quant/ggml_types.h"

#include <gizml/error.h>

namespace gizml::llm {
namespace {

// Indexed by type id; blockSize 0 marks ids that are unused or retired.
constexpr GgmlTypeTraits kTraits[] = {
    {"F32", 1, 4},
    {"F16", 1, 2},
    {"Q4_0", 32, 2 + 16},
    {"Q4_1", 32, 2 + 2 + 16},
    {nullptr, 0, 0},  // Q4_2, removed
    {nullptr, 0, 0},  // Q4_3, removed
    {"Q5_0", 32, 2 + 4 + 16},
    {"Q5_1", 32, 2 + 2 + 4 + 16},
    {"Q8_0", 32, 2 + 32},
    {"Q8_1", 32, 4 + 4 + 32},
    {"Q2_K", kKQuantBlock, 2 + 2 + kKQuantBlock / 16 + kKQuantBlock / 4},
    {"Q3_K", kKQuantBlock, 2 + kKQuantBlock / 4 + kKQuantBlock / 8 + 12},
    {"Q4_K", kKQuantBlock, 2 + 2 + kKQuantBlock / 2 + 12},
    {"Q5_K", kKQuantBlock, 2 + 2 + kKQuantBlock / 2 + kKQuantBlock / 8 + 12},
    {"Q6_K", kKQuantBlock, 2 + kKQuantBlock / 2 + kKQuantBlock / 4 + kKQuantBlock / 16},
    {"Q8_K", kKQuantBlock, 4 + kKQuantBlock + kKQuantBlock / 8},
    {"IQ2_XXS", kKQuantBlock, 2 + kKQuantBlock / 4},
    {"IQ2_XS", kKQuantBlock, 2 + kKQuantBlock / 4 + kKQuantBlock / 32},
    {"IQ3_XXS", kKQuantBlock, 2 + kKQuantBlock / 4 + kKQuantBlock / 8},
    {"IQ1_S", kKQuantBlock, 2 + kKQuantBlock / 8 + kKQuantBlock / 16},
    {"IQ4_NL", 32, 2 + 16},
    {"IQ3_S", kKQuantBlock, 2 + kKQuantBlock / 4 + kKQuantBlock / 8 + kKQuantBlock / 32 + 4},
    {"IQ2_S", kKQuantBlock, 2 + kKQuantBlock / 4 + kKQuantBlock / 16},
    {"IQ4_XS", kKQuantBlock, 2 + 2 + kKQuantBlock / 2 + kKQuantBlock / 64},
    {"I8", 1, 1},
    {"I16", 1, 2},
    {"I32", 1, 4},
    {"I64", 1, 8},
    {"F64", 1, 8},
    {"IQ1_M", kKQuantBlock, kKQuantBlock / 8 + kKQuantBlock / 16 + kKQuantBlock / 32},
    {"BF16", 1, 2},
    {nullptr, 0, 0},  // Q4_0_4_4, removed
    {nullptr, 0, 0},  // Q4_0_4_8, removed
    {nullptr, 0, 0},  // Q4_0_8_8, removed
    {"TQ1_0", kKQuantBlock, 2 + 4 * 13},
    {"TQ2_0", kKQuantBlock, 2 + 64},
    {nullptr, 0, 0},  // IQ4_NL_4_4, removed
    {nullptr, 0, 0},  // IQ4_NL_4_8, removed
    {nullptr, 0, 0},  // IQ4_NL_8_8, removed
    {"MXFP4", 32, 1 + 16},
    {"NVFP4", 64, 4 + 32},
    {"Q1_0", 128, 2 + 16},
};

}  // namespace

const GgmlTypeTraits* ggmlTypeTraits(uint32_t id) {
  if (id >= std::size(kTraits) || kTraits[id].blockSize == 0) return nullptr;
  return &kTraits[id];
}

const GgmlTypeTraits& ggmlTraits(GgmlType type) {
  const GgmlTypeTraits* traits = ggmlTypeTraits(static_cast<uint32_t>(type));
  if (!traits) throw Error("unknown ggml type " + std::to_string(static_cast<uint32_t>(type)));
  return *traits;
}

std::string ggmlTypeName(uint32_t id) {
  const GgmlTypeTraits* traits = ggmlTypeTraits(id);
  return traits ? traits->name : "type " + std::to_string(id);
}

}  // namespace gizml::llm
