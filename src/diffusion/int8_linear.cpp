// ConvRot's W8A8 linear (int8_linear.h) from netops::int8Rows: the weight's rows are rotated and
// quantized by the same function as the activations, so its per-row scale is the per-output-
// channel scale max |H w| / 127. Stored codes (ComfyUI's) keep their own rotation and scales.
#include "int8_linear.h"

#include <gizhw/gpu.h>
#include <gizml/error.h>
#include <gizml/netops.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "netops/rows_common.h"

namespace gizml::diffusion {

namespace {

constexpr int64_t kGroup = netops::rows::kInt8Group;  // int8Rows rotates groups of this many values

// x [rows, in] with zero columns up to `width`, on x's device.
T::Tensor padded(const T::Tensor& x, int64_t width) {
  if (x.size(1) == width) return x.contiguous();
  T::Tensor zeros = T::zeros({x.size(0), width - x.size(1)}, x.dtype());
  if (x.onGpu()) zeros = zeros.on(gizhw::gpu::Gpu(x.storage()->gpu()));
  return T::concat({x, zeros}, 1);
}

int64_t paddedWidth(int64_t in) { return (in + kGroup - 1) / kGroup * kGroup; }

// (H over 256 / r) (x) (identity over r) [256, 256]: within a group of 256 (256 / r groups of
// r), it adds the groups' values at the same place. int8Rows' H over 256 after it makes H over
// r on each group (H over 256 = (H over 256 / r) (x) (H over r), and each H is its own inverse).
T::Tensor firstRotation(int64_t r) {
  const int64_t n = kGroup / r;
  std::vector<float> h(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    h[static_cast<size_t>(i * n + i)] = 1.0f;
    netops::rows::regularHadamard(h.data() + i * n, n);  // row i of H (symmetric)
  }
  T::Tensor m = T::zeros({kGroup, kGroup});
  float* out = m.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t a = 0; a < r; ++a) out[(i * r + a) * kGroup + j * r + a] = h[static_cast<size_t>(i * n + j)];
  return m;
}

}  // namespace

T::Tensor FourBitCodes::grid() const {
  return netops::w4a8Grid(packed, groupScales.dtype() == DType::F32 ? groupScales : groupScales.cast(DType::F32), levels,
                          group);
}

T::Tensor Int8Codes::grid() const { return fourBit ? fourBit->grid() : codes; }

void checkCodes(const Int8Codes& w) {
  if (w.fourBit) {
    const FourBitCodes& f = *w.fourBit;
    const bool ok = f.packed.ndim() == 2 && f.packed.dtype() == DType::I8 && !f.packed.onGpu() && f.group > 0 &&
                    (2 * f.packed.size(1)) % f.group == 0 &&
                    f.groupScales.shape() == T::Shape{f.packed.size(0), 2 * f.packed.size(1) / f.group} &&
                    (f.groupScales.dtype() == DType::F32 || f.groupScales.dtype() == DType::F16) &&
                    f.levels.shape() == T::Shape{16} && !f.groupScales.onGpu() && !f.levels.onGpu() &&
                    f.levels.dtype() == DType::F32;
    if (!ok)
      throw Error("Int8Codes: 4-bit codes " + T::shapeText(f.packed.shape()) + ", group scales " +
                  T::shapeText(f.groupScales.shape()) + " and levels " + T::shapeText(f.levels.shape()) +
                  " are not [out, in / 2] I8, [out, in / " + std::to_string(f.group) + "] F16 or F32 and [16] F32 on the host");
  } else if (w.codes.ndim() != 2 || w.codes.dtype() != DType::I8 || w.codes.onGpu()) {
    throw Error("Int8Codes: codes of shape " + T::shapeText(w.codes.shape()) + " and dtype " +
                dtypeName(w.codes.dtype()) + " are not an [out, in] I8 host matrix");
  }
  const int64_t out = w.outputs(), in = w.inputs();
  if (w.scales.shape() != T::Shape{out} || w.scales.dtype() != DType::F32 || w.scales.onGpu())
    throw Error("Int8Codes: scales of shape " + T::shapeText(w.scales.shape()) + " are not [" + std::to_string(out) +
                "] F32 on the host (one per output channel)");
  bool powerOf4 = w.rotation >= 1;
  for (int64_t r = w.rotation; powerOf4 && r > 1; r /= 4) powerOf4 = r % 4 == 0;
  if (!powerOf4 || w.rotation > kGroup || in % w.rotation != 0)
    throw Error("Int8Codes: rotation over " + std::to_string(w.rotation) + " values, expected 1 (none) or 4, 16, " +
                "64 or 256 dividing the " + std::to_string(in) + " inputs");
}

T::Tensor dequantized(const Int8Codes& w) {
  checkCodes(w);
  const int64_t out = w.outputs();
  T::Tensor values = (T::lazy(w.grid()).cast(DType::F32) * T::lazy(w.scales.reshape({out, 1}))).eval().contiguous();
  rotateBack(values, w.rotation);
  return values;
}

void rotateBack(T::Tensor& values, int64_t rotation) {
  if (rotation <= 1) return;
  float* v = values.data<float>();
  for (int64_t g = 0; g < values.numel(); g += rotation) netops::rows::regularHadamard(v + g, rotation);
}

T::Tensor w4a8Levels(const std::optional<T::Tensor>& codebook, int bits) {
  if (codebook) return codebook->cast(DType::F32).contiguous();
  std::vector<double> levels(static_cast<size_t>(1 << bits));
  for (int code = 0; code < (1 << bits); ++code) levels[static_cast<size_t>(code)] = code - (1 << (bits - 1));
  return T::tensor({1 << bits}, levels);
}

T::Tensor w4a8Grid(const T::Tensor& packed, const T::Tensor& groupScales, const std::optional<T::Tensor>& codebook,
                   int64_t in, int64_t groupSize, int bits) {
  const T::Tensor scales = groupScales.cast(DType::F32).contiguous();
  if (bits == 4) return netops::w4a8Grid(packed, scales, w4a8Levels(codebook, 4), groupSize);
  // 6 bits: each code's low nibble as at 4 bits, then a plane of its top two bits.
  const int64_t out = packed.size(0), cols = packed.size(1);
  const T::Tensor bytes = packed.contiguous();
  const std::vector<float> levels = w4a8Levels(codebook, bits).toFloats();
  T::Tensor grid = T::empty({out, in}, DType::I8);
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data<int8_t>());
  const float* s = scales.data<float>();
  int8_t* g = grid.data<int8_t>();
  for (int64_t n = 0; n < out; ++n) {
    const uint8_t* row = b + n * cols;
    for (int64_t k = 0; k < in; ++k) {
      int code = (row[k / 2] >> (4 * (k % 2))) & 0xF;
      code |= ((row[in / 2 + k / 4] >> (2 * (k % 4))) & 0x3) << 4;
      // torch: float32 level times float32 scale, round() half to even, clamp.
      const float v = std::nearbyint(levels[static_cast<size_t>(code)] * s[n * (in / groupSize) + k / groupSize]);
      g[n * in + k] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
  }
  return grid;
}

Int8Linear::Int8Linear(const T::Tensor& w) : in_(w.size(1)) {
  if (w.ndim() != 2 || w.dtype() != DType::F32 || w.onGpu())
    throw Error("Int8Linear: weight of shape " + T::shapeText(w.shape()) + " is not an [out, in] F32 host matrix");
  const std::vector<T::Tensor> qs = netops::int8Rows(padded(w, paddedWidth(in_)));
  codes_ = qs[0].cast(DType::I8).contiguous().transpose(0, 1);
  scales_ = qs[1].reshape({1, w.size(0)}).contiguous();
}

Int8Linear::Int8Linear(const Int8Codes& w) : in_(w.inputs()) {
  checkCodes(w);
  if (w.fourBit) fourBit_ = w.fourBit;
  else codes_ = padded(w.codes, paddedWidth(in_)).transpose(0, 1);
  scales_ = w.scales.reshape({1, w.outputs()}).contiguous();
  if (w.rotation != kGroup) mix_ = firstRotation(w.rotation);
}

T::Tensor Int8Linear::operator()(const T::Tensor& x) const {
  if (x.ndim() != 2 || x.size(1) != in_)
    throw Error("Int8Linear: input of shape " + T::shapeText(x.shape()) + " is not [rows, " + std::to_string(in_) +
                "]");
  const int64_t width = paddedWidth(in_);
  T::Tensor rows = padded(x.cast(DType::F32), width);
  if (mix_) rows = T::matmul(rows.reshape({-1, kGroup}), *mix_).reshape({x.size(0), width});
  const std::vector<T::Tensor> qs = netops::int8Rows(rows);
  // The codes' exact integer product (VNNI / AVX2 on the CPU, the INT8 matrix cores on a GPU).
  const T::Tensor codes = fourBit_ ? padded(fourBit_->grid(), width).transpose(0, 1) : codes_;
  const T::Tensor sums = T::intMatmul(qs[0].cast(DType::I8), codes);
  // The two scales multiplied first, as comfy_kitchen's int8_linear.
  return (T::lazy(sums).cast(DType::F32) * (T::lazy(qs[1]) * T::lazy(scales_))).eval();
}

Int8Linear Int8Linear::to(const gizhw::gpu::Gpu& gpu) const {
  Int8Linear l;
  l.in_ = in_;
  if (fourBit_)
    l.fourBit_ = FourBitCodes{fourBit_->packed.on(gpu), fourBit_->groupScales.on(gpu), fourBit_->levels.on(gpu),
                              fourBit_->group};
  else
    l.codes_ = codes_.contiguous().on(gpu);  // the GPU's product reads [k, n] rows
  l.scales_ = scales_.on(gpu);
  if (mix_) l.mix_ = mix_->on(gpu);
  return l;
}

}  // namespace gizml::diffusion
