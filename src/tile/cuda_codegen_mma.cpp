// The tensor-core pieces of Tile::cuda: mma.sync m16n8k16 (f32 accumulators) fed by ldmatrix
// from swizzled shared memory, and the cp.async block copies of the p.stages pipeline.
#include <algorithm>
#include <cstdlib>

#include "tensor/gpu/codegen.h"
#include "tile/cuda_codegen.h"

namespace gizml::tile::cudagen {

bool mmaLayout(int64_t rows, int64_t cols, int warps, MmaLayout& out) {
  bool found = false;
  int64_t best = 0;
  for (int wr = 1; wr <= warps; ++wr) {
    if (warps % wr != 0) continue;
    const int wc = warps / wr;
    if (rows % (16 * wr) != 0 || cols % (8 * wc) != 0) continue;
    const int64_t fm = rows / (16 * wr), fn = cols / (8 * wc);
    // Fewest shared-memory fragment loads per k step: fm of A (16 rows) and fn of B (8 columns).
    const int64_t cost = 16 * fm + 8 * fn;
    if (found && cost >= best) continue;
    found = true;
    best = cost;
    out = MmaLayout{rows, cols, wr, wc, static_cast<int>(fm), static_cast<int>(fn)};
  }
  return found;
}

bool wgmmaLayout(int64_t rows, int64_t cols, int warps, MmaLayout& out) {
  if (warps % 4 != 0 || rows % (16 * warps) != 0 || cols % 16 != 0 || cols > 256) return false;
  out = MmaLayout{rows, cols, warps, 1, static_cast<int>(rows / (16 * warps)), static_cast<int>(cols / 8), true};
  return true;
}

std::string mmaHelpers() {
  // The wrappers are shared with the netops kernels; the layout of a result tile is the tile's own.
  return gpuops::mmaSource() + R"(#ifndef GIZML_TILE_MMA_LIN
#define GIZML_TILE_MMA_LIN
// The element of an mma result tile in register e of thread t (src/tile/cuda_codegen.h).
__device__ __forceinline__ int gz_mma_lin(int t, int e, int cols, int wc, int fm, int fn, bool wg) {
  const int lane = t & 31, warp = t >> 5, q = e & 3, j = (e >> 2) % fn, i = (e >> 2) / fn;
  const int row = (wg ? (warp >> 2) * fm * 64 + i * 64 + (warp & 3) * 16 : (warp / wc) * fm * 16 + i * 16) +
                  (lane >> 2) + (q >> 1) * 8;
  const int col = (warp % wc) * fn * 8 + j * 8 + (lane & 3) * 2 + (q & 1);
  return row * cols + col;
}
// The byte offset of 16-byte chunk `chunk` of row r in a block of `rows` rows laid out as
// cudagen::SharedBlock says: panels of w chunks a row, XOR-swizzled by address bits 7.. (wgmma's
// swizzle modes: bits [4, 4 + log2 w) ^= bits [7, 7 + log2 w)).
__device__ __forceinline__ unsigned gz_swz(int r, int chunk, int rows, int w) {
  const unsigned off = (unsigned)((chunk / w) * rows * w * 16 + r * w * 16 + (chunk % w) * 16);
  return off ^ (((off >> 7) & (unsigned)(w - 1)) << 4);
}
#endif
)";
}

SharedBlock sharedBlock(int64_t rows, int64_t cols) {
  SharedBlock b{rows, cols, 1};
  while (b.chunks < 8 && (cols / 8) % (2 * b.chunks) == 0) b.chunks *= 2;
  return b;
}

std::string mmaLoop(const MmaLayout& l, int64_t K, const std::string& sa, const std::string& sb, const std::string& acc,
                    bool f16) {
  const std::string fm = std::to_string(l.fm), fn = std::to_string(l.fn);
  const std::string swA = sharedBlock(l.rows, K).swizzleArgs(), swB = sharedBlock(K, l.cols).swizzleArgs();
  std::string s;
  s += "{\n";
  s += "  const int lane = t & 31, warp = t >> 5;\n";
  s += "  const int wm0 = (warp / " + std::to_string(l.wc) + ") * " + std::to_string(l.fm * 16) + ", wn0 = (warp % " +
       std::to_string(l.wc) + ") * " + std::to_string(l.fn * 8) + ";\n";
  s += "  const unsigned gz_sa = " + sa + ", gz_sb = " + sb + ";\n";
  s += "  #pragma unroll\n";
  s += "  for (int kk = 0; kk < " + std::to_string(K) + "; kk += 16) {\n";
  s += "    unsigned af[" + fm + "][4], bf[" + fn + "][2];\n";
  // A fragment i: rows wm0 + 16i + (lane % 16), k kk + (lane / 16) 8: matrices a0..a3.
  s += "    #pragma unroll\n";
  s += "    for (int i = 0; i < " + fm + "; ++i) gz_ldsm_x4(gz_sa + gz_swz(wm0 + i * 16 + (lane & 15), kk / 8 + (lane >> 4), " +
       swA + "), af[i]);\n";
  // B fragment j: k rows kk + (lane % 16), columns wn0 + 8j: b0 (k 0..7), b1 (k 8..15), transposed.
  s += "    #pragma unroll\n";
  s += "    for (int j = 0; j < " + fn + "; ++j) gz_ldsm_x2_trans(gz_sb + gz_swz(kk + (lane & 15), wn0 / 8 + j, " + swB +
       "), bf[j]);\n";
  s += "    #pragma unroll\n";
  s += "    for (int i = 0; i < " + fm + "; ++i) {\n";
  s += "      #pragma unroll\n";
  s += "      for (int j = 0; j < " + fn + "; ++j) " + (f16 ? "gz_mma_f16(" : "gz_mma_bf16(") + acc + " + (i * " + fn +
       " + j) * 4, af[i], bf[j]);\n";
  s += "    }\n";
  s += "  }\n";
  s += "}\n";
  return s;
}

namespace {
// wgmma's swizzle mode for panels of `chunks` 16-byte chunks a row: 1 128-byte, 2 64-byte, 3 32-byte.
int swizzleMode(int chunks) { return chunks == 8 ? 1 : chunks == 4 ? 2 : 3; }
}  // namespace

std::string wgmmaLoop(const MmaLayout& l, int64_t K, const std::string& sa, const std::string& sb, const std::string& acc,
                      bool f16) {
  const SharedBlock a = sharedBlock(l.rows, K), b = sharedBlock(K, l.cols);
  const auto num = [](int64_t x) { return std::to_string(x); };
  std::string s;
  s += "{\n";
  s += "  const int warp = t >> 5;\n";
  s += "  const unsigned gz_sa = " + sa + " + (unsigned)((warp >> 2) * " + num(l.fm * 64 * a.chunks * 16) + "), gz_sb = " +
       sb + ";\n";
  s += "  gz_wgmma_fence();\n";
  // A, K-major: a slab's 64 rows of its panel, rows of a.chunks chunks, 8-row groups SBO apart; a k
  // step of 16 is two chunks inside one panel (LBO, the next panel, is not used). The start
  // address moves by whole chunks and the hardware swizzles the address it forms, as gz_swz does.
  // B, N-major: k rows from kk; its N atoms (panels of b.chunks 8 columns) LBO apart, 8-row groups
  // of k SBO apart.
  for (int64_t kk = 0; kk < K; kk += 16) {
    const int64_t aStart = (kk / 8 / a.chunks) * a.panelBytes() + (kk / 8 % a.chunks) * 16;
    const std::string db = "gz_wgmma_desc(gz_sb + " + num(kk * b.chunks * 16) + "u, " + num(b.panelBytes()) + "u, " +
                           num(8 * b.chunks * 16) + "u, " + num(swizzleMode(b.chunks)) + ")";
    for (int i = 0; i < l.fm; ++i) {
      const std::string da = "gz_wgmma_desc(gz_sa + " + num(aStart + i * 64 * a.chunks * 16) + "u, " + num(a.panelBytes()) +
                             "u, " + num(8 * a.chunks * 16) + "u, " + num(swizzleMode(a.chunks)) + ")";
      s += "  gz_wgmma<" + num(l.cols) + ", " + (f16 ? "true" : "false") + ">(" + acc + " + " +
           num(int64_t{i} * l.fn * 4) + ", " + da + ", " + db + ", 1);\n";
    }
  }
  s += "  gz_wgmma_commit();\n";
  s += "  gz_wgmma_wait<0>();\n";
  s += "}\n";
  return s;
}

std::string copyBlockAsync(const tir::Operand& o, const std::string& tensor, const std::string& row0,
                           const std::string& col0, const std::string& dst, int threads) {
  const int64_t R = o.block[0], C = o.block[1], H = o.tensor.shape()[0], W = o.tensor.shape()[1];
  const int64_t s0 = o.tensor.strides()[0], s1 = o.tensor.strides()[1];
  const std::string chunks = std::to_string(C / 8), swizzle = sharedBlock(R, C).swizzleArgs();
  // 16-byte copies need 8 contiguous elements at 16-byte aligned addresses: unit column stride,
  // a row stride of a multiple of 8 elements and an aligned first element (checked at run time).
  const bool stridesAllow = s1 == 1 && s0 % 8 == 0;
  std::string s;
  s += "{\n";
  s += "  const long long gz_r0 = " + row0 + ", gz_c0 = " + col0 + ";\n";
  s += std::string("  const bool gz_vec = ") +
       (stridesAllow ? "(((unsigned long long)" + tensor + ") & 15ull) == 0ull" : "false") + ";\n";
  s += "  const unsigned short* gz_src = (const unsigned short*)" + tensor + ";\n";
  s += "  for (int v = t; v < " + std::to_string(R * C / 8) + "; v += " + std::to_string(threads) + ") {\n";
  s += "    const int r = v / " + chunks + ", c = v % " + chunks + " * 8;\n";
  s += "    const long long gr = gz_r0 + r, gc = gz_c0 + c;\n";
  s += "    unsigned short* d = (unsigned short*)(" + dst + " + gz_swz(r, c / 8, " + swizzle + "));\n";
  s += "    if (gz_vec && gr >= 0 && gr < " + std::to_string(H) + "LL && gc >= 0 && gc + 8 <= " + std::to_string(W) +
       "LL) {\n";
  s += "      gz_cp_async16(gz_saddr(d), gz_src + gr * " + std::to_string(s0) + "LL + gc);\n";
  s += "    } else {\n";
  s += "      #pragma unroll\n";
  s += "      for (int e = 0; e < 8; ++e) {\n";
  s += "        const long long ge = gc + e;\n";
  s += "        d[e] = gr >= 0 && gr < " + std::to_string(H) + "LL && ge >= 0 && ge < " + std::to_string(W) +
       "LL ? gz_src[gr * " + std::to_string(s0) + "LL + ge * " + std::to_string(s1) + "LL] : (unsigned short)0;\n";
  s += "      }\n";
  s += "    }\n";
  s += "  }\n";
  s += "}\n";
  return s;
}

}  // namespace gizml::tile::cudagen
