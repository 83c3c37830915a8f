// Launches of the attention-rows kernels (src/netops/kernels/netops_attention_rows.cu.inc): the
// checks only a GPU needs, the choice between the tensor-core and the plain kernel, and the
// geometry (which rows are q, k and v, which keys each query sees) as kernel parameters.
#include "netops/attention_rows_gpu.h"

#include <cmath>
#include <string>

#include "netops/kernel_sources.h"
#include "netops/rows_common.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops::detail {
namespace {

using gizhw::gpu::Dim3;
using gizhw::gpu::Gpu;

constexpr int64_t kPlainMax = 512;  // GZ_AR_PLAIN_MAX: the plain kernel's 16 values a lane
constexpr int64_t kBlockQueries = 64;  // GZ_AR_BM
constexpr unsigned kMmaThreads = 128, kPlainThreads = 256;

// An Error unless t is BF16 rows of unit element stride on qkv's GPU (the first operand's).
void requireBf16Rows(const char* fn, const char* name, const Tensor& t, const Tensor& first, const char* firstName) {
  check(t.onGpu() && t.storage()->gpu() == first.storage()->gpu(),
        std::string(fn) + ": " + name + " is on " + t.device() + ", but " + firstName + " is on " + first.device() +
            " (both must be on one GPU)");
  check(t.dtype() == DType::BF16, std::string(fn) + ": " + name + " must be BF16 on a GPU, got " + dtypeName(t.dtype()));
  check(t.ndim() == 2 && (t.size(1) <= 1 || t.strides()[1] == 1) && t.strides()[0] >= t.size(1),
        std::string(fn) + ": " + name + " must be rows of adjacent values (row-strided views are fine), got strides [" +
            std::to_string(t.ndim() > 0 ? t.strides()[0] : 0) + ", " +
            std::to_string(t.ndim() > 1 ? t.strides()[1] : 0) + "]");
}

void requireF32On(const char* fn, const char* name, const Tensor& t, const Tensor& qkv) {
  check(t.onGpu() && t.storage()->gpu() == qkv.storage()->gpu(),
        std::string(fn) + ": " + name + " is on " + t.device() + ", but qkv is on " + qkv.device() +
            " (the GPU path reads it there)");
  check(t.dtype() == DType::F32, std::string(fn) + ": " + name + " must be F32, got " + dtypeName(t.dtype()));
  check(t.isContiguous(), std::string(fn) + ": " + name + " must be contiguous");
}

// Which rows each query sees and where q, k, v and out are (the kernels' parameters after the head).
struct Geometry {
  uint64_t q = 0, k = 0, v = 0, out = 0;  // device addresses of head 0 of row 0
  int64_t qStride = 0, kvStride = 0, outStride = 0, nq = 0;
  int mode = 0;  // 0: rows in groups, 1: NATTEN's 3D windows
  int64_t grid[3] = {1, 1, 1}, kernel[3] = {1, 1, 0};
};

// Whether every K and V row can be staged 16 bytes at a time (cp.async) and q read 4 at a time.
bool alignedForMma(const Geometry& g) {
  const bool addresses = (g.k % 16 == 0) && (g.v % 16 == 0) && (g.q % 4 == 0) && (g.out % 4 == 0);
  return addresses && g.kvStride % 8 == 0 && g.qStride % 2 == 0 && g.outStride % 2 == 0;
}

void launchAttention(const char* fn, const Gpu& gpu, const Geometry& g, int64_t heads, int64_t head, float scale) {
  if (g.nq == 0) return;
  check(heads < 65536, std::string(fn) + ": " + std::to_string(heads) + " heads exceed one launch (65535)");
  AttentionKernel which = attentionKernelFor(gpu.properties(), head);
  if (which == AttentionKernel::Bf16Mma && !alignedForMma(g)) which = AttentionKernel::Plain;
  const std::string& source = netopsAttentionRowsKernelSource();
  int64_t nq = g.nq, qs = g.qStride, ks = g.kvStride, os = g.outStride;
  int64_t g0 = g.grid[0], g1 = g.grid[1], g2 = g.grid[2], k0 = g.kernel[0], k1 = g.kernel[1], k2 = g.kernel[2];
  uint64_t q = g.q, k = g.k, v = g.v, out = g.out;
  int mode = g.mode;
  float s = scale;
  if (which == AttentionKernel::Bf16Mma) {
    void* params[] = {&q, &qs, &k, &v, &ks, &out, &os, &nq, &mode, &g0, &g1, &g2, &k0, &k1, &k2, &s};
    const unsigned blocks = static_cast<unsigned>((nq + kBlockQueries - 1) / kBlockQueries);
    gpu.kernel(source, head == 64 ? "gz_ar_mma64" : "gz_ar_mma128")
        .launch(Dim3{blocks, static_cast<unsigned>(heads), 1}, Dim3{kMmaThreads, 1, 1}, 0, gpu.stream(), params);
    return;
  }
  check(head <= kPlainMax, std::string(fn) + ": head " + std::to_string(head) + " is over " +
                               std::to_string(kPlainMax) + ", the most a GPU's plain attention kernel takes");
  int h = static_cast<int>(head);
  void* params[] = {&q, &qs, &k, &v, &ks, &out, &os, &nq, &h, &mode, &g0, &g1, &g2, &k0, &k1, &k2, &s};
  const int64_t perBlock = kPlainThreads / 32;  // a warp a query
  const unsigned blocks = static_cast<unsigned>((nq + perBlock - 1) / perBlock);
  gpu.kernel(source, "gz_ar_plain")
      .launch(Dim3{blocks, static_cast<unsigned>(heads), 1}, Dim3{kPlainThreads, 1, 1}, 0, gpu.stream(), params);
}

uint64_t bytesAt(const Tensor& t, int64_t elements) { return gpuops::address(t) + static_cast<uint64_t>(elements) * 2; }

template <class... Args>
void launch(const Gpu& gpu, const char* name, Dim3 grid, unsigned threads, Args... args) {
  void* params[] = {static_cast<void*>(&args)...};
  gpu.staticKernel(netopsAttentionRowsKernelSource(), name)
      .launch(grid, Dim3{threads, 1, 1}, 0, gpu.stream(), params);
}

// The 8-bit path's passes (the kernel source's "the 8-bit path"): prepared q and k in F32, k's
// mean over each group, q and smoothed k to INT8 per block of 64 rows, V to E4M3 per channel
// (transposed), then the attention. The scratch tensors stay allocated until the queued kernels
// that read them have run (the allocator is ordered on the stream).
void attention8(const Gpu& gpu, const Tensor& qkv, int64_t n, int64_t heads, int64_t head, int64_t group, int64_t nq,
                const Tensor& out, const HeadPrep* prep, int64_t half) {
  const auto& device = qkv.storage()->gpu();
  const int64_t hd = heads * head, blocks = (n + 63) / 64, npad = blocks * 64;
  const int64_t groups = group > 0 ? (n + group - 1) / group : 1;
  const Tensor pk = gpuops::empty({n, 2, hd}, DType::F32, device);
  const Tensor mean = gpuops::empty({groups, hd}, DType::F32, device);
  const Tensor qi = gpuops::empty({n, hd}, DType::I8, device), ki = gpuops::empty({n, hd}, DType::I8, device);
  const Tensor qscale = gpuops::empty({blocks, heads}, DType::F32, device);
  const Tensor kscale = gpuops::empty({blocks, heads}, DType::F32, device);
  const Tensor vt = gpuops::empty({hd, npad}, DType::U8, device), vscale = gpuops::empty({hd}, DType::F32, device);
  const int hs = static_cast<int>(heads), h = static_cast<int>(head);
  const int64_t stride = qkv.strides()[0], threads = n * 2 * heads;
  const uint64_t none = 0;
  launch(gpu, "gz_ar8_prep", Dim3{static_cast<unsigned>((threads + kPlainThreads - 1) / kPlainThreads), 1, 1},
         kPlainThreads, gpuops::address(qkv), stride, n, hs, h, gpuops::address(pk),
         prep ? gpuops::address(prep->qw) : none, prep ? gpuops::address(prep->kw) : none,
         prep && half > 0 ? gpuops::address(prep->cos) : none, prep && half > 0 ? gpuops::address(prep->sin) : none,
         static_cast<int>(half), static_cast<float>(prep ? prep->eps : 0.0));
  launch(gpu, "gz_ar8_kmean", Dim3{static_cast<unsigned>(groups), static_cast<unsigned>(heads), 1}, 128,
         gpuops::address(pk), gpuops::address(mean), n, hs, h, group);
  launch(gpu, "gz_ar8_quant", Dim3{static_cast<unsigned>(blocks), static_cast<unsigned>(heads), 2}, 128,
         gpuops::address(pk), gpuops::address(mean), gpuops::address(qi), gpuops::address(ki),
         gpuops::address(qscale), gpuops::address(kscale), n, hs, h, group);
  const Tensor vmax = gpuops::empty({hd}, DType::F32, device);  // the bits of each channel's max |v|
  gpu.fill(gpuops::address(vmax), 0, static_cast<size_t>(hd) * 4, gpu.stream());
  const Dim3 vGrid{static_cast<unsigned>(heads), static_cast<unsigned>(blocks), 1};
  launch(gpu, "gz_ar8_vmax", vGrid, 128, bytesAt(qkv, 2 * hd), stride, gpuops::address(vmax), n, h);
  launch(gpu, "gz_ar8_quant_v", vGrid, 128, bytesAt(qkv, 2 * hd), stride, gpuops::address(vmax), gpuops::address(vt),
         gpuops::address(vscale), n, npad, h);
  launch(gpu, head == 64 ? "gz_ar8_attn64" : "gz_ar8_attn128",
         Dim3{static_cast<unsigned>((nq + 63) / 64), static_cast<unsigned>(heads), 1}, kMmaThreads,
         gpuops::address(qi), gpuops::address(ki), gpuops::address(vt), gpuops::address(qscale),
         gpuops::address(kscale), gpuops::address(vscale), gpuops::address(out), out.strides()[0], n, nq, hs, group,
         npad, static_cast<float>(1.0 / std::sqrt(static_cast<double>(head))));
}

}  // namespace

AttentionKernel attentionKernelFor(const gizhw::gpu::Properties& props, int64_t head, bool quantized) {
  const bool nvidia = props.vendor == gizhw::gpu::Vendor::Nvidia;
  if (!nvidia || props.major < 8 || (head != 64 && head != 128)) return AttentionKernel::Plain;
  const bool fp8 = props.major * 10 + props.minor >= 89;  // K.hasFp8Mma: Ada, Hopper and later
  return quantized && fp8 ? AttentionKernel::Int8Fp8 : AttentionKernel::Bf16Mma;
}

void headPrepGpu(const char* fn, const Tensor& qkv, int64_t n, int64_t heads, int64_t head, const HeadPrep& p,
                 int64_t half, int64_t row0) {
  requireBf16Rows(fn, "qkv", qkv, qkv, "qkv");
  requireF32On(fn, "prep.qw", p.qw, qkv);
  requireF32On(fn, "prep.kw", p.kw, qkv);
  if (half > 0) {
    requireF32On(fn, "prep.cos", p.cos, qkv);
    requireF32On(fn, "prep.sin", p.sin, qkv);
  }
  if (n == 0) return;
  const Gpu gpu(qkv.storage()->gpu());
  uint64_t at = gpuops::address(qkv), qw = gpuops::address(p.qw), kw = gpuops::address(p.kw);
  uint64_t cs = half > 0 ? gpuops::address(p.cos) : 0, sn = half > 0 ? gpuops::address(p.sin) : 0;
  int64_t stride = qkv.strides()[0], rows = n, r0 = row0;
  int hs = static_cast<int>(heads), hd = static_cast<int>(head), hf = static_cast<int>(half);
  float eps = static_cast<float>(p.eps);
  void* params[] = {&at, &stride, &rows, &hs, &hd, &qw, &kw, &cs, &sn, &hf, &r0, &eps};
  const int64_t threads = n * 2 * heads;
  check(threads / kPlainThreads < (int64_t{1} << 31), std::string(fn) + ": " + std::to_string(n) +
                                                          " rows of " + std::to_string(heads) + " heads exceed one launch");
  gpu.staticKernel(netopsAttentionRowsKernelSource(), "gz_ar_prep")
      .launch(Dim3{static_cast<unsigned>((threads + kPlainThreads - 1) / kPlainThreads), 1, 1},
              Dim3{kPlainThreads, 1, 1}, 0, gpu.stream(), params);
}

void attentionRowsGpu(const char* fn, const Tensor& qkv, int64_t n, int64_t heads, int64_t head, bool quantized,
                      int64_t group, int64_t nq, const Tensor& out, const std::vector<HeadPrep>& prep, int64_t half) {
  requireBf16Rows(fn, "qkv", qkv, qkv, "qkv");
  requireBf16Rows(fn, "out", out, qkv, "qkv");
  const Gpu gpu(qkv.storage()->gpu());
  if (quantized && attentionKernelFor(gpu.properties(), head, true) == AttentionKernel::Int8Fp8 &&
      gpuops::address(out) % 4 == 0 && out.strides()[0] % 2 == 0) {
    if (!prep.empty()) {
      requireF32On(fn, "prep.qw", prep[0].qw, qkv);
      requireF32On(fn, "prep.kw", prep[0].kw, qkv);
      if (half > 0) {
        requireF32On(fn, "prep.cos", prep[0].cos, qkv);
        requireF32On(fn, "prep.sin", prep[0].sin, qkv);
      }
    }
    if (nq > 0) attention8(gpu, qkv, n, heads, head, group, nq, out, prep.empty() ? nullptr : &prep[0], half);
    return;
  }
  // The checks of prep's tensors come before anything is queued: a bad one leaves qkv as it was.
  if (!prep.empty()) headPrepGpu(fn, qkv, n, heads, head, prep[0], half, 0);
  const int64_t hd = heads * head;
  Geometry g;
  g.q = gpuops::address(qkv);
  g.k = bytesAt(qkv, hd);
  g.v = bytesAt(qkv, 2 * hd);
  g.out = gpuops::address(out);
  g.qStride = g.kvStride = qkv.strides()[0];
  g.outStride = out.strides()[0];
  g.nq = nq;
  g.mode = 0;
  g.grid[2] = n;
  g.kernel[2] = group;
  launchAttention(fn, gpu, g, heads, head, static_cast<float>(1.0 / std::sqrt(static_cast<double>(head))));
}

void crossAttentionRowsGpu(const char* fn, const Tensor& q, const Tensor& kv, int64_t heads, int64_t head,
                           const Tensor& out) {
  requireBf16Rows(fn, "q", q, q, "q");
  requireBf16Rows(fn, "kv", kv, q, "q");
  requireBf16Rows(fn, "out", out, q, "q");
  Geometry g;
  g.q = gpuops::address(q);
  g.k = gpuops::address(kv);
  g.v = bytesAt(kv, heads * head);
  g.out = gpuops::address(out);
  g.qStride = q.strides()[0];
  g.kvStride = kv.strides()[0];
  g.outStride = out.strides()[0];
  g.nq = q.size(0);
  g.mode = 0;
  g.grid[2] = kv.size(0);
  g.kernel[2] = 0;  // every query sees every key
  launchAttention(fn, Gpu(q.storage()->gpu()), g, heads, head,
                  static_cast<float>(1.0 / std::sqrt(static_cast<double>(head))));
}

Tensor neighborhood3dGpu(const char* fn, const Tensor& qkv, const std::vector<int64_t>& grid,
                         const std::vector<int64_t>& kernel, int64_t heads, int64_t head, float scale) {
  requireBf16Rows(fn, "qkv", qkv, qkv, "qkv");
  const int64_t positions = qkv.size(0), hd = heads * head;
  Tensor out = gpuops::empty({positions, hd}, DType::BF16, qkv.storage()->gpu());
  Geometry g;
  g.q = gpuops::address(qkv);
  g.k = bytesAt(qkv, hd);
  g.v = bytesAt(qkv, 2 * hd);
  g.out = gpuops::address(out);
  g.qStride = g.kvStride = qkv.strides()[0];
  g.outStride = hd;
  g.nq = positions;
  g.mode = 1;
  for (int a = 0; a < 3; ++a) {
    g.grid[a] = grid[static_cast<size_t>(a)];
    g.kernel[a] = kernel[static_cast<size_t>(a)];
  }
  launchAttention(fn, Gpu(qkv.storage()->gpu()), g, heads, head, scale);
  return out;
}

}  // namespace gizml::netops::detail
