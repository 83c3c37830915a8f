// One function per block format. Each computes exactly the float32 operations of gguf-py's
// numpy code in the same order; products and sums sit in separate statements so that no
// compiler fuses them into an FMA, which would round differently.
#include "llm/quant/ggml_dequant.h"

#include <gizml/dtype.h>
#include <gizml/error.h>

#include <cstring>

#include "core/thread_pool.h"
#include "llm/quant/ggml_types.h"

namespace gizml::llm {
namespace {

float loadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return halfToFloat(h);
}

float loadF32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

// Low nibbles give values 0-15, high nibbles 16-31.
void blockQ4_0(const uint8_t* b, float* y) {
  const float d = loadHalf(b);
  const uint8_t* qs = b + 2;
  for (int l = 0; l < 16; ++l) {
    y[l] = d * static_cast<float>((qs[l] & 0x0F) - 8);
    y[l + 16] = d * static_cast<float>((qs[l] >> 4) - 8);
  }
}

void blockQ4_1(const uint8_t* b, float* y) {
  const float d = loadHalf(b);
  const float m = loadHalf(b + 2);
  const uint8_t* qs = b + 4;
  for (int l = 0; l < 16; ++l) {
    const float lo = d * static_cast<float>(qs[l] & 0x0F);
    const float hi = d * static_cast<float>(qs[l] >> 4);
    y[l] = lo + m;
    y[l + 16] = hi + m;
  }
}

// Bit i of the little-endian u32 qh is bit 4 of value i.
int q5Value(const uint8_t* qs, uint32_t qh, int i) {
  const int low = i < 16 ? (qs[i] & 0x0F) : (qs[i - 16] >> 4);
  return low | static_cast<int>(((qh >> i) & 1u) << 4);
}

void blockQ5_0(const uint8_t* b, float* y) {
  const float d = loadHalf(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(q5Value(b + 6, qh, i) - 16);
}

void blockQ5_1(const uint8_t* b, float* y) {
  const float d = loadHalf(b);
  const float m = loadHalf(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int i = 0; i < 32; ++i) {
    const float scaled = d * static_cast<float>(q5Value(b + 8, qh, i));
    y[i] = scaled + m;
  }
}

void blockQ8_0(const uint8_t* b, float* y) {
  const float d = loadHalf(b);
  for (int i = 0; i < 32; ++i) y[i] = static_cast<float>(static_cast<int8_t>(b[2 + i])) * d;
}

// Layout: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin. Value i of 256:
// half h = i / 128, shift s = (i / 32) % 4, lane l = i % 32 -> bits 2s of qs[32h + l].
void blockQ2_K(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = loadHalf(b + 80);
  const float dmin = loadHalf(b + 82);
  for (int i = 0; i < kKQuantBlock; ++i) {
    const int h = i / 128, s = (i / 32) % 4, l = i % 32;
    const uint8_t sc = scales[i / 16];
    const float dl = d * static_cast<float>(sc & 0x0F);
    const float ml = dmin * static_cast<float>(sc >> 4);
    const float scaled = dl * static_cast<float>((qs[32 * h + l] >> (2 * s)) & 3);
    y[i] = scaled - ml;
  }
}

// Layout: hmask[32], qs[64], scales[12] (sixteen 6-bit values, biased by 32), d. The high bit
// comes from hmask[l] bit i / 32 and subtracts 4 when it is clear.
void blockQ3_K(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = loadHalf(b + 108);
  float dl[16];
  for (int j = 0; j < 16; ++j) {
    const int low = (sc[j % 8] >> (4 * (j / 8))) & 0x0F;
    const int high = (sc[8 + j % 4] >> (2 * (j / 4))) & 0x03;
    dl[j] = d * static_cast<float>((low | (high << 4)) - 32);
  }
  for (int i = 0; i < kKQuantBlock; ++i) {
    const int h = i / 128, s = (i / 32) % 4, l = i % 32;
    const int low = (qs[32 * h + l] >> (2 * s)) & 3;
    const int high = ((hmask[l] >> (i / 32)) & 1) ^ 1;
    y[i] = dl[i / 16] * static_cast<float>(low - 4 * high);
  }
}

// Eight 6-bit scales and mins packed in 12 bytes (Q4_K and Q5_K).
void scaleMinK4(const uint8_t* p, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = p[j] & 0x3F;
    mn[j] = p[4 + j] & 0x3F;
    sc[4 + j] = static_cast<uint8_t>((p[8 + j] & 0x0F) | ((p[j] >> 2) & 0x30));
    mn[4 + j] = static_cast<uint8_t>((p[8 + j] >> 4) | ((p[4 + j] >> 2) & 0x30));
  }
}

// Value i: group g = i / 32 (own scale and min), nibble of qs[32 (g / 2) + i % 32], the low one
// for even g.
int k4Nibble(const uint8_t* qs, int i) {
  const int g = i / 32;
  return (qs[32 * (g / 2) + i % 32] >> (4 * (g % 2))) & 0x0F;
}

void blockQ4_K(const uint8_t* b, float* y) {
  const float d = loadHalf(b);
  const float dmin = loadHalf(b + 2);
  uint8_t sc[8], mn[8];
  scaleMinK4(b + 4, sc, mn);
  const uint8_t* qs = b + 16;
  for (int i = 0; i < kKQuantBlock; ++i) {
    const float dl = d * static_cast<float>(sc[i / 32]);
    const float ml = dmin * static_cast<float>(mn[i / 32]);
    const float scaled = dl * static_cast<float>(k4Nibble(qs, i));
    y[i] = scaled - ml;
  }
}

// As Q4_K with a fifth bit: qh[32] bit i / 32 of qh[i % 32].
void blockQ5_K(const uint8_t* b, float* y) {
  const float d = loadHalf(b);
  const float dmin = loadHalf(b + 2);
  uint8_t sc[8], mn[8];
  scaleMinK4(b + 4, sc, mn);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int i = 0; i < kKQuantBlock; ++i) {
    const int q = k4Nibble(qs, i) | (((qh[i % 32] >> (i / 32)) & 1) << 4);
    const float dl = d * static_cast<float>(sc[i / 32]);
    const float ml = dmin * static_cast<float>(mn[i / 32]);
    const float scaled = dl * static_cast<float>(q);
    y[i] = scaled - ml;
  }
}

// Layout: ql[128], qh[64], int8 scales[16], d. Value i: half h = i / 128, r = i % 128; low
// nibble of ql[64h + r % 64] (the high one for r >= 64), two bits 2 (r / 32) of qh[32h + r % 32].
void blockQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = loadHalf(b + 208);
  for (int i = 0; i < kKQuantBlock; ++i) {
    const int h = i / 128, r = i % 128;
    const int low = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
    const int high = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
    const float dl = d * static_cast<float>(scales[i / 16]);
    y[i] = dl * static_cast<float>((low | (high << 4)) - 32);
  }
}

// f32 d, int8 qs[256], then block sums that dequantization ignores.
void blockQ8_K(const uint8_t* b, float* y) {
  const float d = loadF32(b);
  for (int i = 0; i < kKQuantBlock; ++i) y[i] = d * static_cast<float>(static_cast<int8_t>(b[4 + i]));
}

void blockF32(const uint8_t* b, float* y) { std::memcpy(y, b, 4); }
void blockF16(const uint8_t* b, float* y) { *y = loadHalf(b); }
void blockBF16(const uint8_t* b, float* y) {
  uint16_t h;
  std::memcpy(&h, b, 2);
  *y = bf16ToFloat(h);
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn blockFunction(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return blockF32;
    case GgmlType::F16: return blockF16;
    case GgmlType::BF16: return blockBF16;
    case GgmlType::Q4_0: return blockQ4_0;
    case GgmlType::Q4_1: return blockQ4_1;
    case GgmlType::Q5_0: return blockQ5_0;
    case GgmlType::Q5_1: return blockQ5_1;
    case GgmlType::Q8_0: return blockQ8_0;
    case GgmlType::Q2_K: return blockQ2_K;
    case GgmlType::Q3_K: return blockQ3_K;
    case GgmlType::Q4_K: return blockQ4_K;
    case GgmlType::Q5_K: return blockQ5_K;
    case GgmlType::Q6_K: return blockQ6_K;
    case GgmlType::Q8_K: return blockQ8_K;
    default: return nullptr;
  }
}

}  // namespace

bool canDequantize(GgmlType type) { return blockFunction(type) != nullptr; }

void dequantize(GgmlType type, const uint8_t* src, float* dst, int64_t count) {
  const BlockFn fn = blockFunction(type);
  const std::string name = ggmlTypeName(static_cast<uint32_t>(type));
  check(fn != nullptr, "dequantization of " + name + " is not supported");
  const GgmlTypeTraits& traits = ggmlTraits(type);
  check(count >= 0 && count % traits.blockSize == 0,
        "dequantize " + name + ": " + std::to_string(count) + " values are not whole blocks of " +
            std::to_string(traits.blockSize));
  const int64_t blocks = count / traits.blockSize;
  // Large tensors (embeddings) are worth spreading over the cores; 4096 blocks per task.
  core::parallelFor(blocks, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(src + i * traits.typeSize, dst + i * traits.blockSize);
  });
}

}  // namespace gizml::llm
