// The KV cache's layout (cpu/kv_attention.h): storing a token's keys and values in its page, and
// reading a block of one head back as stored (F32 in place, 16-bit elements, codes).
#include <gizml/dtype.h>
#include <gizml/error.h>

#include <algorithm>
#include <array>

#include "core/thread_pool.h"
#include "cpu/convert.h"
#include "cpu/kv_attention.h"
#include "cpu/kv_products.h"
#include "cpu/kv_codes.h"

namespace gizml::cpu {
namespace {

void writeCode(uint8_t* row, int64_t index, int bits, uint8_t code) {
  const int64_t bit = index * bits;
  const auto mask = static_cast<uint8_t>(((1 << bits) - 1) << (bit % 8));
  row[bit / 8] = static_cast<uint8_t>((row[bit / 8] & ~mask) | (code << (bit % 8)));
}

template <class T>
void placeRun(uint8_t* at, int64_t stride, const void* run, int64_t count) {
  for (int64_t i = 0; i < count; ++i) reinterpret_cast<T*>(at)[i * stride] = static_cast<const T*>(run)[i];
}

// n values of x as `dtype` elements `stride` elements apart from `at`: converted a run at a time
// (by F16C for F16 where the CPU has it), then placed.
void writeElements(uint8_t* at, int64_t stride, DType dtype, const float* x, int64_t n) {
  if (stride == 1) return storeF32(dtype, x, n, at);
  const auto size = static_cast<int64_t>(dtypeSize(dtype));
  std::array<float, 64> run;  // room for 64 elements of up to 4 bytes
  for (int64_t i0 = 0; i0 < n; i0 += 64) {
    const int64_t count = std::min<int64_t>(64, n - i0);
    storeF32(dtype, x + i0, count, run.data());
    uint8_t* first = at + i0 * stride * size;
    if (size == 4) placeRun<float>(first, stride, run.data(), count);
    else placeRun<uint16_t>(first, stride, run.data(), count);
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
  const int64_t bytes = l.kvHeads * P * kvRowBytes(l.values, l.headDim), ranges = l.kvHeads * P * 2;
  return {l.values.data + page * bytes, l.values.ranges ? l.values.ranges + page * ranges : nullptr};
}

// Asks for the cache lines that storing head h of the token at `position` writes: one in each of
// its key columns (headDim of them, a key row apart) and its value row. A decode step's store met
// those misses one strided store at a time (the store was 2.5 % of a one-thread Qwen3-shaped
// decode); asked for together, they overlap.
void prefetchHeadLines(const KvLayer& l, int64_t h, int64_t position) {
  const int64_t page = l.pages[position / P], offset = position % P;
  const int64_t keyRow = kvRowBytes(l.keys, P), valueRow = kvRowBytes(l.values, l.headDim);
  const int64_t keyBits = l.keys.bits > 0 ? l.keys.bits : 8 * static_cast<int64_t>(dtypeSize(l.keys.dtype));
  const uint8_t* keys = keyPage(l, page).data + h * l.headDim * keyRow + offset * keyBits / 8;
  for (int64_t d = 0; d < l.headDim; ++d) __builtin_prefetch(keys + d * keyRow, 1);
  const uint8_t* row = valuePage(l, page).data + (h * P + offset) * valueRow;
  for (int64_t b = 0; b < valueRow; b += 64) __builtin_prefetch(row + b, 1);
}

// Calls f(first, count, page, offset) for each page's part of positions k0 .. k0 + count - 1.
template <class F>
void forEachPage(const KvLayer& l, int64_t k0, int64_t count, F f) {
  forEachPagePart(k0, count, [&](int64_t first, int64_t n) { f(first, n, l.pages[first / P], first % P); });
}

}  // namespace

bool rotatesHeads(const KvSide& side, int64_t headDim) {
  return side.bits > 0 && headDim > 1 && (headDim & (headDim - 1)) == 0;
}

int64_t kvRowBytes(const KvSide& side, int64_t count) {
  return side.bits > 0 ? (count * side.bits + 7) / 8 : count * static_cast<int64_t>(dtypeSize(side.dtype));
}

void storeHeadRows(const KvLayer& layer, int64_t start, int64_t rows, int64_t head, const float* keys,
                   const float* values, int64_t stride) {
  const int64_t dim = layer.headDim;
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
    // Keys: dimension d of the head is column head dim + d of the page, element `offset`.
    const float* k = keys + r * stride + head * dim;
    uint8_t* columns = kp.data + head * dim * keyRow;
    if (layer.keys.bits > 0) {
      const CodeRange range = codeValues(prepared(layer.keys, k), dim, layer.keys.bits, codes.data());
      uint16_t* at = kp.ranges + (head * P + offset) * 2;
      at[0] = range.scale, at[1] = range.offset;
      for (int64_t d = 0; d < dim; ++d) writeCode(columns + d * keyRow, offset, layer.keys.bits, codes[d]);
    } else {
      const auto size = static_cast<int64_t>(dtypeSize(layer.keys.dtype));
      writeElements(columns + offset * size, keyRow / size, layer.keys.dtype, k, dim);
    }
    // Values: the head's row at (head, offset) of the page.
    const float* v = values + r * stride + head * dim;
    uint8_t* row = vp.data + (head * P + offset) * valueRow;
    if (layer.values.bits > 0) {
      const CodeRange range = codeValues(prepared(layer.values, v), dim, layer.values.bits, codes.data());
      uint16_t* at = vp.ranges + (head * P + offset) * 2;
      at[0] = range.scale, at[1] = range.offset;
      for (int64_t d = 0; d < dim; ++d) writeCode(row, d, layer.values.bits, codes[d]);
    } else {
      writeElements(row, 1, layer.values.dtype, v, dim);
    }
  }
}

void storeKeysValues(const KvLayer& layer, int64_t start, int64_t rows, const float* keys, const float* values,
                     int64_t stride) {
  if (rows <= 0) return;
  const int64_t heads = layer.kvHeads, dim = layer.headDim;
  // Heads write apart; so do blocks of positions cut at multiples of 64 (a key column's byte
  // holds the codes of up to 8 consecutive positions). A prefill's rows over the threads (on the
  // caller alone they were 4 % of a Qwen3-shaped 2-thread prefill with the F16 cache); a few
  // rows' heads over the threads too, each head's lines asked for first (a decode step's rows
  // are stored by its attention's tasks instead: cachedAttention's newKeys).
  constexpr int64_t kBlock = 64;
  const int64_t firstBlock = start / kBlock, blocks = (start + rows - 1) / kBlock - firstBlock + 1;
  const bool few = rows <= kKvFewRows;
  const int64_t perTask = std::min(rows, kBlock) * dim * 2;
  core::parallelFor(blocks * heads, few ? 1 : std::max<int64_t>(1, 16384 / perTask), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t block = firstBlock + t / heads;
      const int64_t r0 = std::max<int64_t>(0, block * kBlock - start), r1 = std::min(rows, (block + 1) * kBlock - start);
      if (few) {  // the first row's lines, and the last row's where it is another row
        prefetchHeadLines(layer, t % heads, start + r0);
        if (r1 - r0 > 1) prefetchHeadLines(layer, t % heads, start + r1 - 1);
      }
      storeHeadRows(layer, start + r0, r1 - r0, t % heads, keys + r0 * stride, values + r0 * stride, stride);
    }
  });
}

namespace {

// The scales and offsets of `count` consecutive stored pairs as floats, zeros after them up to
// kKvLanes (the score kernel reads whole vectors). The halves widened together (F16C where the
// CPU has it), then taken apart.
void widenRanges(const uint16_t* pairs, int64_t count, KvScratch& scratch) {
  const auto padded = static_cast<size_t>((count + kKvLanes - 1) / kKvLanes * kKvLanes);
  scratch.halves.resize(static_cast<size_t>(count * 2));
  loadF32(DType::F16, pairs, 1, count * 2, scratch.halves.data());
  scratch.scales.assign(padded, 0.0f);
  scratch.offsets.assign(padded, 0.0f);
  for (size_t j = 0; j < static_cast<size_t>(count); ++j) {
    scratch.scales[j] = scratch.halves[j * 2];
    scratch.offsets[j] = scratch.halves[j * 2 + 1];
  }
}

KvElements elementsOf(const KvSide& side) {
  if (side.bits > 0) return KvElements::Codes;
  return side.dtype == DType::F32 ? KvElements::F32 : side.dtype == DType::F16 ? KvElements::F16 : KvElements::BF16;
}

}  // namespace

void prefetchPageStart(const KvLayer& layer, int64_t kvHead, int64_t position) {
  constexpr int64_t kBytes = 4096, kRangeBytes = P * 2 * 2;  // a head's ranges in a page: all of them
  const int64_t page = layer.pages[position / P];
  const Page kp = keyPage(layer, page), vp = valuePage(layer, page);
  const uint8_t* keys = kp.data + kvHead * layer.headDim * kvRowBytes(layer.keys, P);
  const uint8_t* values = vp.data + kvHead * P * kvRowBytes(layer.values, layer.headDim);
  for (int64_t b = 0; b < kBytes; b += 64) {
    __builtin_prefetch(keys + b);
    __builtin_prefetch(values + b);
  }
  for (const uint16_t* ranges : {kp.ranges, vp.ranges})
    if (ranges)
      for (int64_t b = 0; b < kRangeBytes; b += 64) __builtin_prefetch(reinterpret_cast<const uint8_t*>(ranges + kvHead * P * 2) + b);
}

HeadRows keyBlock(const KvLayer& layer, int64_t kvHead, int64_t first, int64_t count, KvScratch& scratch) {
  const KvSide& side = layer.keys;
  const int64_t dim = layer.headDim, row = kvRowBytes(side, P), offset = first % P;
  const Page page = keyPage(layer, layer.pages[first / P]);
  const uint8_t* columns = page.data + kvHead * dim * row;
  const int64_t padded = (count + kKvLanes - 1) / kKvLanes * kKvLanes;
  // In place where whole vectors from `offset` stay within a row (attention's blocks start on a page).
  if (side.bits == 0 && offset + padded <= P) {
    const int64_t size = static_cast<int64_t>(dtypeSize(side.dtype));
    return {{columns + offset * size, P, elementsOf(side)}, nullptr, nullptr};
  }
  check(side.bits > 0, "keyBlock: keys as elements are read from a page's start");
  widenRanges(page.ranges + (kvHead * P + offset) * 2, count, scratch);
  if (side.bits == 8 && offset + padded <= P)
    return {{columns + offset, row, KvElements::Codes}, scratch.scales.data(), scratch.offsets.data()};
  scratch.codes.assign(static_cast<size_t>(dim * padded), 0);
  for (int64_t d = 0; d < dim; ++d) unpackCodes(columns + d * row, side.bits, offset, count, scratch.codes.data() + d * padded);
  return {{scratch.codes.data(), padded, KvElements::Codes}, scratch.scales.data(), scratch.offsets.data()};
}

HeadRows valueBlock(const KvLayer& layer, int64_t kvHead, int64_t first, int64_t count, KvScratch& scratch) {
  const KvSide& side = layer.values;
  const int64_t dim = layer.headDim, row = kvRowBytes(side, dim), at = kvHead * P + first % P;
  const Page page = valuePage(layer, layer.pages[first / P]);
  if (side.bits == 0) {
    const int64_t size = static_cast<int64_t>(dtypeSize(side.dtype));
    return {{page.data + at * row, row / size, elementsOf(side)}, nullptr, nullptr};
  }
  widenRanges(page.ranges + at * 2, count, scratch);
  if (side.bits == 8) return {{page.data + at * row, row, KvElements::Codes}, scratch.scales.data(), scratch.offsets.data()};
  scratch.codes.resize(static_cast<size_t>(count * dim));
  for (int64_t j = 0; j < count; ++j)
    unpackCodes(page.data + (at + j) * row, side.bits, 0, dim, scratch.codes.data() + j * dim);
  return {{scratch.codes.data(), dim, KvElements::Codes}, scratch.scales.data(), scratch.offsets.data()};
}

}  // namespace gizml::cpu
