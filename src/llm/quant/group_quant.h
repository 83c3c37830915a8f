#pragma once
// Our weight format (docs/format.md): each row of a matrix in groups of `group` values along the
// input dimension; a group is one block of 2 + group*bits/8 bytes: a scale exponent e, a zero
// point code z, then the codes q (bits each, a little-endian bit stream). A value is
//   s * (q - z * (2^bits - 1) / 255),  s = base * 2^((e - 255) / 32),
// with `base` one float per tensor. e and z of each group are chosen to minimise the group's
// squared error.
#include <cstdint>

namespace gizml::llm {

struct GroupFormat {
  int bits = 4;        // 2..8
  int64_t group = 32;  // a multiple of 8
};

/// Checks bits and group; throws gizml::Error naming `what` otherwise.
void checkGroupFormat(const GroupFormat& f, const char* what);
int64_t groupBlockBytes(const GroupFormat& f);
/// Bytes of `cols` values (cols a multiple of the group).
int64_t groupRowBytes(const GroupFormat& f, int64_t cols);
/// The scale of exponent e.
float groupScale(float base, int e);

/// Quantizes rows x cols values (row-major; cols a multiple of the group) into dst
/// (rows * groupRowBytes bytes) in parallel, and returns the tensor's base.
float quantizeGroups(const GroupFormat& f, const float* src, int64_t rows, int64_t cols, uint8_t* dst);
/// The inverse: rows x cols values from src.
void dequantizeGroups(const GroupFormat& f, float base, const uint8_t* src, int64_t rows, int64_t cols,
                      float* dst);

}  // namespace gizml::llm
