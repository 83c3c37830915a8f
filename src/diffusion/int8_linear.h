#pragma once
// A bias-free linear layer x Wᵀ as ConvRot's W8A8 runs it: W's rows rotated by the regular
// Hadamard matrix of 256 along the input and quantized to INT8 per output channel once, at load;
// each call rotates and quantizes the activation rows the same way (netops::int8Rows) and
// multiplies the codes exactly in integers, then scales back by the row's and the channel's
// scales. The rotation is orthogonal, so (H x) . (H w) = x . w: only the rounding to 8 bits
// differs from the F32 product.
//
// ComfyUI's INT8 files (comfy_kitchen's TensorWiseINT8Layout, "int8_tensorwise") store such
// codes already made: rotated over groups of 256, 64 or 16 (`convrot_groupsize`) or not at all,
// with a scale per output channel or one for the tensor. Int8Linear takes them as stored.
#include <gizml/tensor.h>

#include <optional>

namespace gizml::diffusion {

/// INT8 weight codes as ComfyUI stores them: codes [out, in] I8 and scales [out] F32 (a
/// per-tensor scale repeated), the codes' rows rotated over groups of `rotation` input values (a
/// power of 4 up to 256) by the regular Hadamard matrix, or 1 when not rotated.
/// A 4-bit W4A8 weight held as stored, netops::w4a8Grid's operands: packed [out, in / 2] I8,
/// groupScales [out, in / group] F16 where that holds them exactly (FP8 scales, as stored, do:
/// 2 bytes a group of 16, not 4) else F32, levels [16] F32 (w4a8Levels).
struct FourBitCodes {
  T::Tensor packed, groupScales, levels;
  int64_t group = 0;

  /// The INT8 grid [out, in] I8, where packed is.
  T::Tensor grid() const;
};

struct Int8Codes {
  T::Tensor codes, scales;
  int64_t rotation = 1;
  /// A 4-bit weight kept at 4 bits instead of `codes` (empty then): its INT8 grid is made when a
  /// product needs it, one layer at a time.
  std::optional<FourBitCodes> fourBit = std::nullopt;

  /// The codes [out, in] I8: `codes`, or the 4-bit weight's grid.
  T::Tensor grid() const;
  int64_t outputs() const { return fourBit ? fourBit->packed.size(0) : codes.size(0); }
  int64_t inputs() const { return fourBit ? 2 * fourBit->packed.size(1) : codes.size(1); }
};

/// An Error naming what is wrong unless w holds codes [out, in] I8 (or 4-bit codes and their
/// group scales and levels), scales [out] F32 and a rotation of 1 or a power of 4 up to 256
/// dividing in, on the host.
void checkCodes(const Int8Codes& w);

/// What the codes stand for in F32: codes times their row's scale, rotated back (the rotation is
/// its own inverse), as comfy_kitchen's dequantize.
T::Tensor dequantized(const Int8Codes& w);

/// values [out, in] F32 (contiguous, on the host) with each group of `rotation` inputs multiplied
/// by the regular Hadamard matrix of that size, in place: the rotation undone (1: unchanged).
void rotateBack(T::Tensor& values, int64_t rotation);

/// The level each W4A8 code stands for ([16] or [64] F32): codebook's ([16]) or, without one, the
/// uniform code - 8 (code - 32 at 6 bits).
T::Tensor w4a8Levels(const std::optional<T::Tensor>& codebook, int bits);

/// ComfyUI's 4- or 6-bit W4A8 weight (comfy_kitchen's AsymW4A8Int8Layout, "asym_w4a8_int8") on the
/// INT8 grid its product runs on, as comfy_kitchen's _dequant_int4_grouped_to_int8: packed [out,
/// in / 2] I8 (two codes a byte, the even column low; 6 bits: then a plane of each code's top two
/// bits, a byte per four columns), each code read through codebook [16] (or as code - 8, or code -
/// 32 at 6 bits), times its group's scale groupScales [out, in / groupSize] F32, rounded half to
/// even and clamped to [-127, 127]: [out, in] I8. Shapes are the caller's to check.
T::Tensor w4a8Grid(const T::Tensor& packed, const T::Tensor& groupScales, const std::optional<T::Tensor>& codebook,
                   int64_t in, int64_t groupSize, int bits);

class Int8Linear {
 public:
  /// w [out, in] F32 (on the host): inputs not a multiple of 256 are padded with zeros, which
  /// the rotation and the product leave exact.
  explicit Int8Linear(const T::Tensor& w);

  /// The stored codes as they are, no quantizing again (on the host; 4-bit ones kept at 4 bits
  /// and made INT8 at each call). Inputs are rotated over
  /// the codes' groups before they are quantized: int8Rows' rotation over 256 after a first one,
  /// (H over 256 / rotation) (x) (identity over rotation), which together make the codes' own.
  explicit Int8Linear(const Int8Codes& w);

  /// x [rows, in] F32 to [rows, out] F32, where x is (the codes and scales go with x: on a GPU
  /// after `to`).
  tensor::Tensor operator()(const tensor::Tensor& x) const;

  /// The same layer with its codes and scales on gpu.
  Int8Linear to(const gizhw::gpu::Gpu& gpu) const;

  int64_t inputs() const { return in_; }

 private:
  Int8Linear() = default;
  int64_t in_ = 0;
  // [padded in, out] I8: the rotated weight's codes, as intMatmul reads them in place: on the host
  // a transposed view of [out, padded in] rows, on a GPU contiguous. None for a 4-bit weight:
  tensor::Tensor codes_;
  std::optional<FourBitCodes> fourBit_;  // a 4-bit weight's, decoded at each call
  tensor::Tensor scales_;              // [1, out] F32: max |rotated row| / 127 per output channel
  std::optional<tensor::Tensor> mix_;  // [256, 256] F32: the first rotation of stored codes' inputs
};

}  // namespace gizml::diffusion
