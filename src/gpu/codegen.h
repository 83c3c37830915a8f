#pragma once
// Kernel sources: the generated elementwise kernel of a Lazy expression, and the fixed kernels
// (reductions, softmax, cumsum, matmul, copies) kept as string resources in kernels/*.cu.inc.
#include <gizml/tensor.h>

#include <string>
#include <vector>

#include "tensor/lazy_node.h"

namespace gizhw::gpu {

/// One generated kernel for a whole Lazy expression: each thread computes whole elements, every
/// node a local variable, rounded as the CPU rounds. The source depends on the expression's
/// structure, dtypes, rank and which leaves are contiguous, broadcast or strided; sizes,
/// strides, addresses and scalar values are parameters, so chains of one pattern share a kernel.
struct ElementwisePlan {
  std::string source;
  std::vector<const gizml::tensor::Lazy::Node*> leaves;  // parameter order
  std::vector<gizml::tensor::Shape> leafStrides;          // over `dims`
  std::vector<char> leafKind;                             // 'C' contiguous, 'Z' broadcast, 'S' strided
  std::vector<uint64_t> scalarBits;                       // each scalar's working value
  gizml::tensor::Shape dims;                              // the output's axes, coalesced
  int64_t numel = 0;
};
constexpr const char* kElementwiseKernel = "gz_elementwise";

ElementwisePlan planElementwise(const gizml::tensor::Lazy::Node& root);
/// The same expression over a deferred product (of the output's shape) as a product kernel's
/// store: the parameter block `P` and `gz_element(const P& p, i64 i, float acc)`, which computes
/// output element i from the product's value acc (its other leaves read from p) and stores it.
/// No prelude and no kernel: the product's source comes first and its kernel calls gz_element.
ElementwisePlan planEpilogue(const gizml::tensor::Lazy::Node& root);
/// The kernel's parameter block (8-byte words) for the output and leaves' device addresses.
std::vector<uint64_t> elementwiseParams(const ElementwisePlan& plan, uint64_t out, const std::vector<uint64_t>& leaves);

/// The fixed kernels, one source (prelude, reductions, matmul, copies).
const std::string& fixedKernelSource();
/// The kernels of gizml::netops (attention, cross entropy rows) with their shared exp and log.
const std::string& netopsKernelSource();
/// The prelude alone (types, dtype conversions and elementwise helpers of cuda_expr.h, shuffles).
const std::string& preludeSource();
/// The kernels of gizml::netops' language-model step (kernels/netops_rows.cu.inc), with the prelude.
const std::string& netopsRowsKernelSource();
/// The tensor-core and asynchronous-copy wrappers (kernels/mma.cu.inc), for kernels that include them.
const std::string& mmaSource();
/// The sm_90a wrapper gz_wgmma<n, f16> (declared in mma.cu.inc) for one N (a multiple of 8 in
/// [8, 256]): the instruction names each of its n / 2 accumulator registers.
std::string wgmmaSource(int n, bool f16);
/// Attention over packed BF16 rows (kernels/netops_attention_rows.cu.inc, its 8-bit path in
/// netops_attention8.cu.inc) with the prelude and the mma wrappers; defined in
/// src/netops/attention_rows_gpu.cpp.
const std::string& netopsAttentionRowsKernelSource();
/// netops' convolution and pooling kernels (kernels/netops_conv.cu.inc) with the prelude and the
/// tensor-core wrappers; defined in src/netops/conv_gpu.cpp.
const std::string& netopsConvKernelSource();
/// netops' norm, ConvRot INT8-row and groupNorm kernels (kernels/netops_norm.cu.inc) after
/// netopsKernelSource(); defined in src/netops/norm_gpu.cpp.
const std::string& netopsNormKernelSource();

}  // namespace gizhw::gpu
