#pragma once
// Keys and values in fewer bits (the engine's kv setting "8", "4", "2" or keys and values apart,
// "4/2"): each head's vector of one token is coded as b-bit integers q in [0, 2^b - 1] with a
// scale and an offset, x ~ scale q + offset. The pair is the one that gives the vector back with
// the least squared error (not the min/max range, which lets one outlier coarsen every step):
// alternately the nearest codes for the pair and the least-squares pair for the codes (Lloyd's
// iteration on a uniform grid; each half-step can only lower the error), from the min/max range,
// until the codes stop changing. Scale and offset are stored in F16, and the codes are the
// nearest ones for the stored pair. A vector with a value that is not finite decodes to NaN.
#include <cstdint>

namespace gizml::cpu {

/// The stored pair of one coded vector (F16 bits).
struct CodeRange {
  uint16_t scale, offset;
};

/// Codes n values of x in `bits` (8, 4 or 2) bits into q (one code a byte) and returns their
/// range; decoded, they are scale q + offset in f32 (F16 scale and offset widened).
CodeRange codeValues(const float* x, int64_t n, int bits, uint8_t* q);

/// The squared error of q under range against x.
double codingError(const float* x, const uint8_t* q, int64_t n, CodeRange range);

}  // namespace gizml::cpu
