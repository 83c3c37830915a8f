#pragma once
// Group-quantized weights repacked once, when a layer is made, for the int8 kernels: panels of P
// output rows (P = 8 for the 256-bit kernels, 16 for AVX-512: one register of 4 codes per row)
// whose codes are interleaved 4 at a time, so that one 4P-byte register holds four codes of each
// of the P rows. A product with four activation codes broadcast to every lane then gives P output
// rows' partial sums in the P lanes, and each group's scale and zero-point correction cost one
// vector operation for all P rows instead of one per row (what the row-major kernels of
// quant_dot.h pay, and what made them slow). llama.cpp repacks Q4_0 the same way for its CPU
// kernels. The packing (P) is chosen with the kernel, per CPU, when the matrix is made.
//
// Layout of panel p (rows Pp .. Pp + P - 1; a last panel's missing rows are zeros), group g:
//  - the group's codes as words, each giving one or two 4P-byte vectors in which byte 4i + j is
//    a code of row i (the vector's 4 columns, j = 0..3):
//    4 bits: 4P bytes per 8 columns; byte 4i + j holds column 8k + j in its low nibble and
//      column 8k + 4 + j in its high nibble (so the two halves need no shuffle).
//    6 bits: the same 4P bytes of low nibbles, then 2P bytes of the codes' top 2 bits: byte m
//      holds those of vector bytes m and 2P + m of the first half (bits 0-1, 2-3) and of the
//      second (bits 4-5, 6-7).
//    2, 3, 5, 7 bits: 4P bytes per 4 columns, one code a byte; 8 bits the same with each code
//      stored minus 128 as a signed byte (maddubs multiplies |q - 128| by the activation carrying
//      q - 128's sign: a code up to 255 times 127 would saturate its int16 pairs).
//  - 2P bytes: the P rows' scale exponents e, then their zero-point bytes z (as stored, so a
//    panel takes the stored size at 4 and 6 bits; the scales come from the 256-entry table).
// Every kernel gives the bits of the portable one (quant_dot.h has the order of the float steps).
// CPUs without AVX2 keep the row-major kernels of quant_dot.h.
#include <cstdint>
#include <span>
#include <vector>

#include "core/page_memory.h"
#include "cpu/cpu_features.h"
#include "cpu/quant_dot.h"

namespace gizml::cpu {

class QuantMatrix {
 public:
  QuantMatrix() = default;
  /// Packs `w` into panels for isa's kernel (by default this CPU's best) when it and the format
  /// allow, else keeps a copy of its scale table and reads w's bytes (which must then outlive
  /// this object) with quantDot's portable kernel. Throws if this CPU cannot run isa.
  explicit QuantMatrix(const QuantWeights& w, Isa isa = bestIsa());

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t group() const { return group_; }
  int bits() const { return bits_; }
  /// Whether the weights were repacked (then the source bytes are no longer read).
  bool packed() const { return !codes_.empty(); }
  /// The kernel that serves this matrix (Portable: quantDot's).
  Isa isa() const { return isa_; }
  /// Whether panels serve these weights on this CPU.
  static bool panelsSupported(int bits, int64_t group);
  /// The rows of a panel for isa's kernel.
  static int64_t panelRowsFor(Isa isa) { return isa == Isa::Avx512Vnni ? 16 : 8; }

  /// y [x.rows, rows] = x W^T, in parallel over panels (or blocks of rows).
  void matmul(const QuantActs& x, float* y) const;

  // The packed arrays, for the kernels.
  int64_t panelRows() const { return panelRows_; }
  int64_t panels() const { return (rows_ + panelRows_ - 1) / panelRows_; }
  int64_t panelCodeBytes() const { return (bits_ == 4 || bits_ == 6 ? cols_ * bits_ : cols_ * 8) * panelRows_ / 8; }
  const uint8_t* panelCodes(int64_t p) const { return codes_.data() + p * panelCodeBytes(); }
  /// Per group, the P rows' exponents then zero points.
  const uint8_t* panelExponents(int64_t p) const { return exponents_.data() + p * (cols_ / group_) * 2 * panelRows_; }
  const float* scaleTable() const { return scaleTable_.data(); }

 private:
  void pack(const QuantWeights& w);
  friend void matmulAll(std::span<const QuantMatrix* const>, const QuantActs&, std::span<float* const>);

  int64_t rows_ = 0, cols_ = 0, group_ = 0;
  int bits_ = 0;
  Isa isa_ = Isa::Portable;
  int64_t panelRows_ = 8;
  core::PageVector<uint8_t> codes_, exponents_;  // mapped in huge pages: decode streams them
  std::vector<float> scaleTable_;  // the scale of each exponent code
  QuantWeights source_;            // unpacked: the source, read in place
};

/// y_i = x W_i^T for matrices that read the same activations (a layer's q, k and v projections):
/// one parallel pass over all their panels, so a decode step wakes the threads once.
void matmulAll(std::span<const QuantMatrix* const> matrices, const QuantActs& x, std::span<float* const> ys);

namespace quant_kernels {
/// Activation rows in flight in a 256-bit kernel (each keeps a float and two integer accumulators
/// in its 16 registers; the AVX-512 kernel, with 32, keeps 8).
inline constexpr int kMaxRows = 4;
/// How far ahead of its reads a kernel prefetches the stream of codes, by the machine: about what
/// one thread reads in the memory's latency. One Zen 5 thread's decode, 2 KiB -> 4 KiB ahead
/// (`giz bench MODEL --prefill 16 --decode 256 --kv f16`, two rounds): Qwen3-0.6B-shaped 4-bit
/// 70.5-75.1 -> 82.9-84.6 tok/s, Qwen3.5-shaped 60.2-61.1 -> 66.8-70.0, Gemma 3 8-bit
/// 121.1-122.8 -> 126.8-131.0, SmolLM2 361-362 -> 380-396. On the Intel Xeon (model 167), whose
/// thread reads a third of a Zen 5's, 4 KiB -> 2 KiB: Qwen3-shaped one thread 22.6-23.2 ->
/// 24.2-24.2, two threads 40.9-42.0 -> 44.0-44.6, Gemma 3 8-bit two threads 59.6-62.1 ->
/// 67.7-70.4 (`--prefill 256 --decode 128`, alternating; prefill the same). On Zen 3 the two
/// were alike. So 4 KiB on AMD's family 1Ah (Zen 5) and later, 2 KiB elsewhere.
int64_t codePrefetchBytes();
/// Asks for the codes `ahead` (codePrefetchBytes) bytes past the `bytes` about to be read. A
/// piece's panels are one sequential stream that a decode step reads from memory once, and the
/// hardware's own prefetchers stop at every 4 KiB page: without this, a decode step's profile
/// showed the kernel waiting on its loads of codes for about a third of its samples.
inline void prefetchCodes(const uint8_t* codes, int64_t bytes, int64_t ahead) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(codes + ahead + b, 0, 3);
}
/// Activation rows per pass over a thread's panels (their codes stay in L2 while every panel
/// passes over them).
inline constexpr int64_t kRowChunk = 64;
/// Activation rows as a kernel reads them: Stride rows interleaved (BlockedActs, or a single row
/// with Stride 1): word w (4 codes) of row r at codes + 4 (w Stride + r), group g's scale and sum at
/// g Stride + r (data only: this header is read by kernel files built for different ISAs).
struct ActRows {
  const int8_t* codes;
  const float* scale;
  const float* sum;
};
/// The blocks several activation rows come in: the AVX-512 kernel's rows in flight (the 256-bit
/// kernels take a block's first or second kMaxRows).
inline constexpr int kBlockRows = 8;
/// x's rows (more than one) interleaved by blocks of kBlockRows for the panel kernels: in block b,
/// word w (4 codes) of its row r at codes + b cols kBlockRows + 4 (w kBlockRows + r), group g's
/// scale and sum at b groups kBlockRows + g kBlockRows + r (a last block's missing rows zeros). A
/// step's words of 8 rows are then one cache line at one pointer, where the rows' own pointers (24
/// with their scales and sums) did not fit the 16 general registers and were reloaded from the
/// stack at every group. Made once per product, before its threads start.
struct BlockedActs {
  std::vector<int8_t> codes;
  std::vector<float> scale, sum;
};
void blockActs(const QuantActs& x, BlockedActs& out);

/// Calls kernel.template operator()<Bits, Steps>() with m's code width (2..8) and its group's
/// steps known to the compiler: 4 for the default group of 32 columns (unrolled: the rows' sums
/// stay in their registers, where a counted loop moved them between registers at every step), 0
/// for other groups (counted). Each ISA's entry below chooses its kernel through this.
template <int Bits, class Kernel>
void withGroupSteps(const QuantMatrix& m, Kernel& kernel) {
  if (m.group() == 32) kernel.template operator()<Bits, 4>();
  else kernel.template operator()<Bits, 0>();
}
template <class Kernel>
void withCodeWidth(const QuantMatrix& m, Kernel&& kernel) {
  switch (m.bits()) {
    case 2: return withGroupSteps<2>(m, kernel);
    case 3: return withGroupSteps<3>(m, kernel);
    case 4: return withGroupSteps<4>(m, kernel);
    case 5: return withGroupSteps<5>(m, kernel);
    case 6: return withGroupSteps<6>(m, kernel);
    case 7: return withGroupSteps<7>(m, kernel);
    default: return withGroupSteps<8>(m, kernel);
  }
}

/// y[r * ldy + o] for the output rows of panels [p0, p1) (clipped to the matrix) and every
/// activation row, one function per ISA (8-row panels for the 256-bit ones, 16 for AVX-512); more
/// than one row read from `blocked`, blockActs(x).
void panelsAvx2(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, const BlockedActs& blocked, float* y,
                int64_t ldy);
void panelsAvxVnni(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, const BlockedActs& blocked,
                   float* y, int64_t ldy);
void panelsAvx512Vnni(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, const BlockedActs& blocked,
                      float* y, int64_t ldy);
}  // namespace quant_kernels

}  // namespace gizml::cpu
