#pragma once
// The GPU side of attention over packed rows (rows_attention.cpp checks the shapes and counts
// first, then calls these when an operand is on a GPU): HeadPrep in place and flash attention on
// BF16 rows (src/netops/kernels/netops_attention_rows.cu.inc). Each checks what only the GPU needs
// (BF16, one device, rows of unit stride) before it queues anything.
#include <gizml/netops_rows.h>

#include <cstdint>
#include <vector>

namespace gizml::netops::detail {

/// Which kernel attention on a GPU of these properties runs for a head of `head` values: BF16
/// tensor cores on NVIDIA sm_80+ for heads of 64 and 128, and there with `quantized` on sm_89+
/// (8-bit matrix cores) the INT8/E4M3 path; else the plain kernel.
enum class AttentionKernel { Plain, Bf16Mma, Int8Fp8 };
AttentionKernel attentionKernelFor(const gizhw::gpu::Properties& props, int64_t head, bool quantized = false);

/// HeadPrep p of q and k of the first n rows of qkv ([rows, 3 heads head] BF16) in place; `half`
/// is p's rotary half (0: none), checked against p by the caller.
void headPrepGpu(const char* fn, const Tensor& qkv, int64_t n, int64_t heads, int64_t head, const HeadPrep& p,
                 int64_t half, int64_t row0);
/// attentionRows on a GPU: out ([nq, heads head] BF16) from qkv ([n, 3 heads head] BF16). prep
/// (none or one, with its half): the BF16 paths apply it in place to qkv first, the 8-bit path
/// (`quantized`, where attentionKernelFor allows it) as it quantizes q and k, leaving qkv as it was.
void attentionRowsGpu(const char* fn, const Tensor& qkv, int64_t n, int64_t heads, int64_t head, bool quantized,
                      int64_t group, int64_t nq, const Tensor& out, const std::vector<HeadPrep>& prep, int64_t half);
/// crossAttentionRows on a GPU: q [nq, heads head], kv [nk, 2 heads head], out [nq, heads head], BF16.
void crossAttentionRowsGpu(const char* fn, const Tensor& q, const Tensor& kv, int64_t heads, int64_t head,
                           const Tensor& out);
/// neighborhood3d on a GPU: qkv [T H W, 3 heads head] BF16 gives [T H W, heads head] BF16.
Tensor neighborhood3dGpu(const char* fn, const Tensor& qkv, const std::vector<int64_t>& grid,
                         const std::vector<int64_t>& kernel, int64_t heads, int64_t head, float scale);

}  // namespace gizml::netops::detail
