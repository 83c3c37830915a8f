// The KV cache's layout (cpu/kv_attention.h): storing a token's keys and values, copying a
// sequence's positions, and reading a block of one head back as f32.
#include <gizml/dtype.h>

#include <array>
#include <cmath>
#include <cstring>

#include "cpu/convert.h"
#include "cpu/kv_attention.h"
#include "cpu/kv_codes.h"

namespace gizml::cpu {
namespace {

// Code `index` of a packed row of `bits`-bit codes, low bits first.
uint8_t readCode(const uint8_t* row, int64_t index, int bits) {
  const int64_t bit = index * bits;
  return static_cast<uint8_t>((row[bit / 8] >> (bit % 8)) & ((1 << bits) - 1));
}

void writeCode(uint8_t* row, int64_t index, int bits, uint8_t code) {
  const int64_t bit = index * bits;
  const auto mask = static_cast<uint8_t>(((1 << bits) - 1) << (bit % 8));
  row[bit / 8] = static_cast<uint8_t>((row[bit / 8] & ~mask) | (code << (bit % 8)));
}

// out[j] = scale(j) codes[first + j] + offset(j) for j < count, codes of Bits bits packed low bits
// first; whole bytes at a time where the run allows (so that the compiler vectorises the loop).
template <int Bits, class Scale, class Offset>
void widenCodes(const uint8_t* codes, int64_t first, int64_t count, Scale scale, Offset offset, float* out) {
  constexpr int perByte = 8 / Bits;
  constexpr uint8_t mask = (1 << Bits) - 1;
  int64_t j = 0;
  for (; j < count && (first + j) % perByte != 0; ++j)
    out[j] = scale(j) * static_cast<float>(readCode(codes, first + j, Bits)) + offset(j);
  const uint8_t* bytes = codes + (first + j) / perByte;
  const int64_t whole = (count - j) / perByte;
  for (int64_t b = 0; b < whole; ++b)
    for (int k = 0; k < perByte; ++k) {
      const int64_t at = j + b * perByte + k;
      out[at] = scale(at) * static_cast<float>((bytes[b] >> (k * Bits)) & mask) + offset(at);
    }
  for (j += whole * perByte; j < count; ++j)
    out[j] = scale(j) * static_cast<float>(readCode(codes, first + j, Bits)) + offset(j);
}

template <class Scale, class Offset>
void widen(int bits, const uint8_t* codes, int64_t first, int64_t count, Scale scale, Offset offset, float* out) {
  if (bits == 8) widenCodes<8>(codes, first, count, scale, offset, out);
  else if (bits == 4) widenCodes<4>(codes, first, count, scale, offset, out);
  else widenCodes<2>(codes, first, count, scale, offset, out);
}

// Element `index` of a row of `dtype` elements, from f32.
void writeElement(uint8_t* row, int64_t index, DType dtype, float v) {
  if (dtype == DType::F32) reinterpret_cast<float*>(row)[index] = v;
  else reinterpret_cast<uint16_t*>(row)[index] = dtype == DType::F16 ? floatToHalf(v) : floatToBf16(v);
}

}  // namespace

bool rotatesHeads(const KvSide& side, int64_t headDim) {
  return side.bits > 0 && headDim > 1 && (headDim & (headDim - 1)) == 0;
}

void rotateHead(float* x, int64_t n) {
  for (int64_t half = 1; half < n; half *= 2)
    for (int64_t i = 0; i < n; i += 2 * half)
      for (int64_t j = i; j < i + half; ++j) {
        const float a = x[j], b = x[j + half];
        x[j] = a + b;
        x[j + half] = a - b;
      }
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t i = 0; i < n; ++i) x[i] *= norm;
}

int64_t kvRowBytes(const KvSide& side, int64_t count) {
  return side.bits > 0 ? (count * side.bits + 7) / 8 : count * static_cast<int64_t>(dtypeSize(side.dtype));
}

void storeKeysValues(const KvLayer& layer, int64_t start, int64_t rows, const float* keys, const float* values,
                     int64_t stride) {
  const int64_t heads = layer.kvHeads, dim = layer.headDim, capacity = layer.capacity;
  const int64_t keyRow = kvRowBytes(layer.keys, capacity), valueRow = kvRowBytes(layer.values, dim);
  std::array<uint8_t, kMaxCodedHead> codes;
  std::array<float, kMaxCodedHead> rotated;
  // The vector a coded side codes: the head's, rotated where the layout rotates.
  const auto prepared = [&](const KvSide& side, const float* x) {
    if (!rotatesHeads(side, dim)) return x;
    std::copy(x, x + dim, rotated.begin());
    rotateHead(rotated.data(), dim);
    return static_cast<const float*>(rotated.data());
  };
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t position = start + r;
    for (int64_t h = 0; h < heads; ++h) {
      // Keys: dimension d of the head is column h dim + d, element `position`.
      const float* k = keys + r * stride + h * dim;
      uint8_t* columns = layer.keys.data + h * dim * keyRow;
      if (layer.keys.bits > 0) {
        const CodeRange range = codeValues(prepared(layer.keys, k), dim, layer.keys.bits, codes.data());
        uint16_t* at = layer.keys.ranges + (h * capacity + position) * 2;
        at[0] = range.scale, at[1] = range.offset;
        for (int64_t d = 0; d < dim; ++d) writeCode(columns + d * keyRow, position, layer.keys.bits, codes[d]);
      } else {
        for (int64_t d = 0; d < dim; ++d) writeElement(columns + d * keyRow, position, layer.keys.dtype, k[d]);
      }
      // Values: the head's row at (position, h).
      const float* v = values + r * stride + h * dim;
      uint8_t* row = layer.values.data + (position * heads + h) * valueRow;
      if (layer.values.bits > 0) {
        const CodeRange range = codeValues(prepared(layer.values, v), dim, layer.values.bits, codes.data());
        uint16_t* at = layer.values.ranges + (position * heads + h) * 2;
        at[0] = range.scale, at[1] = range.offset;
        for (int64_t d = 0; d < dim; ++d) writeCode(row, d, layer.values.bits, codes[d]);
      } else {
        for (int64_t d = 0; d < dim; ++d) writeElement(row, d, layer.values.dtype, v[d]);
      }
    }
  }
}

void copyKeysValues(const KvLayer& from, const KvLayer& to, int64_t length) {
  // The first `length` positions of every key column and of the value rows, and their ranges.
  const int64_t heads = from.kvHeads, dim = from.headDim;
  const int64_t keyRow = kvRowBytes(from.keys, from.capacity), keyBytes = kvRowBytes(from.keys, length);
  for (int64_t column = 0; column < heads * dim; ++column)
    std::memcpy(to.keys.data + column * keyRow, from.keys.data + column * keyRow, static_cast<size_t>(keyBytes));
  std::memcpy(to.values.data, from.values.data, static_cast<size_t>(length * heads * kvRowBytes(from.values, dim)));
  if (from.keys.bits > 0)
    for (int64_t h = 0; h < heads; ++h)
      std::memcpy(to.keys.ranges + h * from.capacity * 2, from.keys.ranges + h * from.capacity * 2,
                  static_cast<size_t>(length * 2) * sizeof(uint16_t));
  if (from.values.bits > 0)
    std::memcpy(to.values.ranges, from.values.ranges, static_cast<size_t>(length * heads * 2) * sizeof(uint16_t));
}

F32Rows keyColumns(const KvLayer& layer, int64_t kvHead, int64_t k0, int64_t keys, std::vector<float>& buffer) {
  const KvSide& side = layer.keys;
  const int64_t dim = layer.headDim, capacity = layer.capacity, row = kvRowBytes(side, capacity);
  const uint8_t* columns = side.data + kvHead * dim * row;
  if (side.bits == 0 && side.dtype == DType::F32) return {reinterpret_cast<const float*>(columns) + k0, capacity};
  buffer.resize(static_cast<size_t>(dim * keys));
  if (side.bits == 0) {
    const auto size = static_cast<int64_t>(dtypeSize(side.dtype));
    for (int64_t d = 0; d < dim; ++d)
      loadF32(side.dtype, columns + d * row + k0 * size, 1, keys, buffer.data() + d * keys);
    return {buffer.data(), keys};
  }
  // Each position's scale and offset, then every dimension's codes through them.
  thread_local std::vector<float> scale, offset;
  scale.resize(static_cast<size_t>(keys)), offset.resize(static_cast<size_t>(keys));
  const uint16_t* ranges = side.ranges + (kvHead * capacity + k0) * 2;
  for (int64_t j = 0; j < keys; ++j) {
    scale[static_cast<size_t>(j)] = halfToFloat(ranges[2 * j]);
    offset[static_cast<size_t>(j)] = halfToFloat(ranges[2 * j + 1]);
  }
  const float* s = scale.data();
  const float* o = offset.data();
  for (int64_t d = 0; d < dim; ++d)
    widen(side.bits, columns + d * row, k0, keys, [s](int64_t j) { return s[j]; }, [o](int64_t j) { return o[j]; },
          buffer.data() + d * keys);
  return {buffer.data(), keys};
}

F32Rows valueRows(const KvLayer& layer, int64_t kvHead, int64_t k0, int64_t keys, std::vector<float>& buffer) {
  const KvSide& side = layer.values;
  const int64_t heads = layer.kvHeads, dim = layer.headDim, row = kvRowBytes(side, dim);
  const auto at = [&](int64_t position) { return side.data + (position * heads + kvHead) * row; };
  if (side.bits == 0 && side.dtype == DType::F32) return {reinterpret_cast<const float*>(at(k0)), heads * dim};
  buffer.resize(static_cast<size_t>(keys * dim));
  for (int64_t j = 0; j < keys; ++j) {
    float* out = buffer.data() + j * dim;
    if (side.bits == 0) {
      loadF32(side.dtype, at(k0 + j), 1, dim, out);
      continue;
    }
    const uint16_t* range = side.ranges + ((k0 + j) * heads + kvHead) * 2;
    const float s = halfToFloat(range[0]), o = halfToFloat(range[1]);
    widen(side.bits, at(k0 + j), 0, dim, [s](int64_t) { return s; }, [o](int64_t) { return o; }, out);
  }
  return {buffer.data(), dim};
}

}  // namespace gizml::cpu
