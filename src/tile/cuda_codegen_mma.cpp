// The tensor-core pieces of Tile::cuda: mma.sync m16n8k16 (f32 accumulators) fed by ldmatrix
// from padded shared memory, and the cp.async block copies of the p.stages pipeline.
#include <algorithm>
#include <cstdlib>

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

const char* mmaHelpers() {
  return R"(#ifndef GIZML_TILE_MMA_HELPERS
#define GIZML_TILE_MMA_HELPERS
// Tensor cores (sm_80+): ldmatrix from shared memory, mma.sync m16n8k16 with f32 accumulators,
// cp.async copies of 16 bytes into shared memory.
__device__ __forceinline__ unsigned gz_saddr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
// Four 8x8 matrices of halves; lanes 8i..8i+7 give the rows of matrix i.
__device__ __forceinline__ void gz_ldsm_x4(unsigned a, unsigned* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
}
// Two 8x8 matrices, transposed: lane l gets rows 2(l%4), 2(l%4)+1 of column l/4.
__device__ __forceinline__ void gz_ldsm_x2_trans(unsigned a, unsigned* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(a) : "memory");
}
__device__ __forceinline__ void gz_mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void gz_mma_f16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void gz_cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void gz_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void gz_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }
// The element of an mma result tile in register e of thread t (src/tile/cuda_codegen.h).
__device__ __forceinline__ int gz_mma_lin(int t, int e, int cols, int wc, int fm, int fn) {
  const int lane = t & 31, warp = t >> 5, q = e & 3, j = (e >> 2) % fn, i = (e >> 2) / fn;
  const int row = (warp / wc) * fm * 16 + i * 16 + (lane >> 2) + (q >> 1) * 8;
  const int col = (warp % wc) * fn * 8 + j * 8 + (lane & 3) * 2 + (q & 1);
  return row * cols + col;
}
#endif
)";
}

std::string mmaLoop(const MmaLayout& l, int64_t K, const std::string& sa, const std::string& sb, const std::string& acc,
                    bool f16) {
  const std::string fm = std::to_string(l.fm), fn = std::to_string(l.fn);
  const std::string pa = std::to_string(pitchHalves(K)), pb = std::to_string(pitchHalves(l.cols));
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
  s += "    for (int i = 0; i < " + fm + "; ++i) gz_ldsm_x4(gz_sa + (unsigned)(((wm0 + i * 16 + (lane & 15)) * " + pa +
       " + kk + (lane >> 4) * 8) * 2), af[i]);\n";
  // B fragment j: k rows kk + (lane % 16), columns wn0 + 8j: b0 (k 0..7), b1 (k 8..15), transposed.
  s += "    #pragma unroll\n";
  s += "    for (int j = 0; j < " + fn + "; ++j) gz_ldsm_x2_trans(gz_sb + (unsigned)(((kk + (lane & 15)) * " + pb +
       " + wn0 + j * 8) * 2), bf[j]);\n";
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

std::string copyBlockAsync(const tir::Operand& o, const std::string& tensor, const std::string& row0,
                           const std::string& col0, const std::string& dst, int threads) {
  const int64_t R = o.block[0], C = o.block[1], H = o.tensor.shape()[0], W = o.tensor.shape()[1];
  const int64_t s0 = o.tensor.strides()[0], s1 = o.tensor.strides()[1];
  const std::string chunks = std::to_string(C / 8), pitch = std::to_string(pitchHalves(C));
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
  s += "    unsigned short* d = " + dst + " + r * " + pitch + " + c;\n";
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
