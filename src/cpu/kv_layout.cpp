// The KV cache's layout (cpu/kv_attention.h): storing a token's keys and values in its page, and
// reading a block of one head back as f32.
#include <gizml/dtype.h>

#include <algorithm>
#include <array>
#include <cmath>

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

// n values of x as `dtype` elements `stride` elements apart from `at`: one loop per dtype.
void writeElements(uint8_t* at, int64_t stride, DType dtype, const float* x, int64_t n) {
  if (dtype == DType::F32) {
    for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(at)[i * stride] = x[i];
  } else if (dtype == DType::F16) {
    for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(at)[i * stride] = floatToHalf(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(at)[i * stride] = floatToBf16(x[i]);
  }
}

constexpr int64_t P = kKvPageTokens;

// One page of a layer's keys or values: its elements or codes, and their ranges.
struct Page {
  uint8_t* data;
  uint16_t* ranges;
};

Page keyPage(const KvLayer& l, int64_t page) {
  const int64_t bytes = l.kvHeads * l.headDim * kvRowBytes(l.keys, P), ranges = l.kvHeads * P * 2;
  return {l.keys.data + page * bytes, l.keys.ranges ? l.keys.ranges + page * ranges : nullptr};
}

Page valuePage(const KvLayer& l, int64_t page) {
  const int64_t bytes = P * l.kvHeads * kvRowBytes(l.values, l.headDim), ranges = P * l.kvHeads * 2;
  return {l.values.data + page * bytes, l.values.ranges ? l.values.ranges + page * ranges : nullptr};
}

// Calls f(first, count, page, offset) for each page's part of positions k0 .. k0 + count - 1.
template <class F>
void forEachPage(const KvLayer& l, int64_t k0, int64_t count, F f) {
  for (int64_t p = k0; p < k0 + count;) {
    const int64_t offset = p % P, n = std::min(P - offset, k0 + count - p);
    f(p, n, l.pages[p / P], offset);
    p += n;
  }
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
  const int64_t heads = layer.kvHeads, dim = layer.headDim;
  const int64_t keyRow = kvRowBytes(layer.keys, P), valueRow = kvRowBytes(layer.values, dim);
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
    const int64_t position = start + r, page = layer.pages[position / P], offset = position % P;
    const Page kp = keyPage(layer, page), vp = valuePage(layer, page);
    for (int64_t h = 0; h < heads; ++h) {
      // Keys: dimension d of the head is column h dim + d of the page, element `offset`.
      const float* k = keys + r * stride + h * dim;
      uint8_t* columns = kp.data + h * dim * keyRow;
      if (layer.keys.bits > 0) {
        const CodeRange range = codeValues(prepared(layer.keys, k), dim, layer.keys.bits, codes.data());
        uint16_t* at = kp.ranges + (h * P + offset) * 2;
        at[0] = range.scale, at[1] = range.offset;
        for (int64_t d = 0; d < dim; ++d) writeCode(columns + d * keyRow, offset, layer.keys.bits, codes[d]);
      } else {
        const auto size = static_cast<int64_t>(dtypeSize(layer.keys.dtype));
        writeElements(columns + offset * size, keyRow / size, layer.keys.dtype, k, dim);
      }
      // Values: the head's row at (offset, h) of the page.
      const float* v = values + r * stride + h * dim;
      uint8_t* row = vp.data + (offset * heads + h) * valueRow;
      if (layer.values.bits > 0) {
        const CodeRange range = codeValues(prepared(layer.values, v), dim, layer.values.bits, codes.data());
        uint16_t* at = vp.ranges + (offset * heads + h) * 2;
        at[0] = range.scale, at[1] = range.offset;
        for (int64_t d = 0; d < dim; ++d) writeCode(row, d, layer.values.bits, codes[d]);
      } else {
        writeElements(row, 1, layer.values.dtype, v, dim);
      }
    }
  }
}

F32Rows keyColumns(const KvLayer& layer, int64_t kvHead, int64_t k0, int64_t keys, std::vector<float>& buffer) {
  const KvSide& side = layer.keys;
  const int64_t dim = layer.headDim, row = kvRowBytes(side, P);
  const auto columnsOf = [&](int64_t page) { return keyPage(layer, page).data + kvHead * dim * row; };
  if (side.bits == 0 && side.dtype == DType::F32 && k0 % P + keys <= P)
    return {reinterpret_cast<const float*>(columnsOf(layer.pages[k0 / P])) + k0 % P, P};
  buffer.resize(static_cast<size_t>(dim * keys));
  // A row of K^T at a time, its pages' parts in order: the buffer is written straight through.
  if (side.bits == 0) {
    const auto size = static_cast<int64_t>(dtypeSize(side.dtype));
    for (int64_t d = 0; d < dim; ++d)
      forEachPage(layer, k0, keys, [&](int64_t first, int64_t count, int64_t page, int64_t offset) {
        loadF32(side.dtype, columnsOf(page) + d * row + offset * size, 1, count, buffer.data() + d * keys + (first - k0));
      });
    return {buffer.data(), keys};
  }
  // Each position's scale and offset, then every dimension's codes through them.
  thread_local std::vector<float> scale, offsets;
  scale.resize(static_cast<size_t>(keys)), offsets.resize(static_cast<size_t>(keys));
  forEachPage(layer, k0, keys, [&](int64_t first, int64_t count, int64_t page, int64_t offset) {
    const uint16_t* ranges = keyPage(layer, page).ranges + (kvHead * P + offset) * 2;
    for (int64_t j = 0; j < count; ++j) {
      scale[static_cast<size_t>(first - k0 + j)] = halfToFloat(ranges[2 * j]);
      offsets[static_cast<size_t>(first - k0 + j)] = halfToFloat(ranges[2 * j + 1]);
    }
  });
  for (int64_t d = 0; d < dim; ++d)
    forEachPage(layer, k0, keys, [&](int64_t first, int64_t count, int64_t page, int64_t offset) {
      const float* s = scale.data() + (first - k0);
      const float* o = offsets.data() + (first - k0);
      widen(side.bits, columnsOf(page) + d * row, offset, count, [s](int64_t j) { return s[j]; },
            [o](int64_t j) { return o[j]; }, buffer.data() + d * keys + (first - k0));
    });
  return {buffer.data(), keys};
}

F32Rows valueRows(const KvLayer& layer, int64_t kvHead, int64_t k0, int64_t keys, std::vector<float>& buffer) {
  const KvSide& side = layer.values;
  const int64_t heads = layer.kvHeads, dim = layer.headDim, row = kvRowBytes(side, dim);
  if (side.bits == 0 && side.dtype == DType::F32 && k0 % P + keys <= P) {
    const uint8_t* at = valuePage(layer, layer.pages[k0 / P]).data + ((k0 % P) * heads + kvHead) * row;
    return {reinterpret_cast<const float*>(at), heads * dim};
  }
  buffer.resize(static_cast<size_t>(keys * dim));
  const int bits = side.bits;
  const DType dtype = side.dtype;
  float* const into = buffer.data();
  forEachPage(layer, k0, keys, [=](int64_t first, int64_t count, int64_t page, int64_t offset) {
    const Page vp = valuePage(layer, page);
    float* out = into + (first - k0) * dim;
    const int64_t at0 = offset * heads + kvHead;
    if (bits == 0) {
      for (int64_t j = 0; j < count; ++j) loadF32(dtype, vp.data + (at0 + j * heads) * row, 1, dim, out + j * dim);
      return;
    }
    for (int64_t j = 0; j < count; ++j) {
      const int64_t at = at0 + j * heads;
      const float s = halfToFloat(vp.ranges[at * 2]), o = halfToFloat(vp.ranges[at * 2 + 1]);
      widen(bits, vp.data + at * row, 0, dim, [s](int64_t) { return s; }, [o](int64_t) { return o; }, out + j * dim);
    }
  });
  return {buffer.data(), dim};
}

std::vector<KeySpan> headSpans(const KvLayer& layer, int64_t kvHead, int64_t k0, int64_t count,
                               std::vector<float>& keyBuffer, std::vector<float>& valueBuffer) {
  const bool inPlace = layer.keys.bits == 0 && layer.keys.dtype == DType::F32 && layer.values.bits == 0 &&
                       layer.values.dtype == DType::F32;
  if (!inPlace)
    return {{k0, count, keyColumns(layer, kvHead, k0, count, keyBuffer),
             valueRows(layer, kvHead, k0, count, valueBuffer)}};
  std::vector<KeySpan> spans;
  forEachPage(layer, k0, count, [&](int64_t first, int64_t n, int64_t, int64_t) {
    spans.push_back({first, n, keyColumns(layer, kvHead, first, n, keyBuffer),
                     valueRows(layer, kvHead, first, n, valueBuffer)});
  });
  return spans;
}

}  // namespace gizml::cpu
