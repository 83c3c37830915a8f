#pragma once
// Kernel sources: the generated elementwise kernel of a Lazy expression, and the fixed kernels
// (reductions, softmax, cumsum, matmul, copies) kept as string resources in kernels/*.cu.inc.
#include <gizml/tensor.h>

#include <string>
#include <vector>

#include "tensor/lazy_node.h"

namespace gizml::gpuops {

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
/// The prelude alone (types, dtype conversions and elementwise helpers of cuda_expr.h, shuffles).
const std::string& preludeSource();
/// The tensor-core and asynchronous-copy wrappers (kernels/mma.cu.inc), for kernels that include them.
const std::string& mmaSource();
/// The sm_90a wrapper gz_wgmma<n, f16> (declared in mma.cu.inc) for one N (a multiple of 8 in
/// [8, 256]): the instruction names each of its n / 2 accumulator registers.
std::string wgmmaSource(int n, bool f16);

}  // namespace gizml::gpuops
