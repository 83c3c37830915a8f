// The GPU backend of the tensor operations: device checks, copies, and the launches of the
// generated and fixed kernels, all on the GPU's stream.
#include <algorithm>

#include "gpu/device.h"
#include "tensor/gpu/codegen.h"
#include "tensor/gpu/tensor_ops.h"
#include "tensor/shape_util.h"

namespace gizml::gpuops {
namespace {

using gizhw::gpu::Dim3;
using gizhw::gpu::Gpu;
using tensor::shapeText;

constexpr unsigned kThreads = 256;

gizhw::gpu::Kernel fixed(const DevicePtr& device, const char* name) {
  return Gpu(device).staticKernel(fixedKernelSource(), name);
}

unsigned blocksFor(int64_t work, const DevicePtr& device, int64_t perBlock = kThreads) {
  const int64_t wanted = (work + perBlock - 1) / perBlock;
  const int64_t cap = int64_t{device->properties.multiprocessors} * 32;
  return static_cast<unsigned>(std::clamp<int64_t>(wanted, 1, std::max<int64_t>(cap, 1)));
}

// A small array of i64 values uploaded for one launch (kept alive by the returned tensor until
// the work that reads it is queued; the allocator reuses it only after that work).
Tensor upload(const std::vector<int64_t>& values, const DevicePtr& device) {
  Tensor t = empty({static_cast<int64_t>(values.size())}, DType::I64, device);
  Gpu gpu(device);
  gpu.copyToDevice(address(t), values.data(), values.size() * 8, gpu.stream());
  return t;
}

template <class... Args>
void launch(const DevicePtr& device, const char* name, Dim3 grid, Dim3 block, Args... args) {
  void* params[] = {static_cast<void*>(&args)...};
  const size_t sizes[] = {sizeof(Args)...};  // (a step recorded on HIP keeps the arguments by these)
  fixed(device, name).launch(grid, block, 0, Gpu(device).stream(), params, sizes);
}

// Where operands are, one at a time: the first one's device, and an Error at the first operand
// elsewhere.
class DeviceCheck {
 public:
  explicit DeviceCheck(std::string_view what) : what_(what) {}
  void add(const Tensor& t, const char* name) {
    if (!first_) {
      first_ = &t;
      firstName_ = name;
      return;
    }
    if (t.storage()->gpu() == first_->storage()->gpu()) return;
    if (name)
      throw Error(std::string(what_) + ": " + name + " is on " + t.device() + ", " + firstName_ + " is on " + first_->device() +
                  " (every operand on one device: move it with on(gpu) or host())");
    throw Error(std::string(what_) + ": operands on two devices, " + first_->device() + " and " + t.device() +
                " (move one with on(gpu) or host())");
  }
  DevicePtr device() const {
    DevicePtr device = first_ ? first_->storage()->gpu() : nullptr;
    if (device) device->checkOpen();
    return device;
  }

 private:
  std::string_view what_;
  const Tensor* first_ = nullptr;
  const char* firstName_ = nullptr;
};

}  // namespace

DevicePtr deviceOf(std::string_view what, std::initializer_list<Operand> operands) {
  DeviceCheck devices(what);
  for (const Operand& o : operands) devices.add(*o.tensor, o.name);
  return devices.device();
}

DevicePtr deviceOf(const Lazy::Node& root, const Tensor* out) {
  DeviceCheck devices("elementwise expression");
  if (out) devices.add(*out, nullptr);
  tensor::forEachNode(root, [&](const Lazy::Node& n) {
    if (n.kind != Lazy::Node::Kind::Leaf && n.kind != Lazy::Node::Kind::Product) return;
    // A deferred product is where its operands are.
    devices.add(n.kind == Lazy::Node::Kind::Leaf ? n.tensor : n.product->operand(), nullptr);
  });
  return devices.device();
}

Gpu gpuOf(const Tensor& t) { return Gpu(t.storage()->gpu()); }

Tensor empty(const Shape& shape, DType dtype, const DevicePtr& device) {
  const int64_t n = tensor::elementCount(shape);
  auto storage = std::make_shared<tensor::Storage>(dtypeBytes(dtype, n), Gpu(device));
  return Tensor(storage, dtype, shape, tensor::contiguousStrides(shape), 0);
}

uint64_t address(const Tensor& t) {
  // An I4 tensor starts at a byte (its views may not split one): its offset is even.
  const int64_t bytes = t.dtype() == DType::I4 ? t.offset() / 2 : t.offset() * static_cast<int64_t>(dtypeSize(t.dtype()));
  return t.storage()->deviceAddress() + static_cast<uint64_t>(bytes);
}

Tensor toDevice(const Tensor& t, const Gpu& gpu) {
  const Tensor c = t.contiguous();
  gpu.device()->checkOpen();
  Tensor out = empty(c.shape(), c.dtype(), gpu.device());
  // From pageable memory the driver stages the bytes before returning, so `c` may go after.
  gpu.copyToDevice(address(out), c.rawData(), dtypeBytes(c.dtype(), c.numel()), gpu.stream());
  return out;
}

Tensor toHost(const Tensor& t) {
  deviceOf("host", {&t});
  const Tensor c = t.contiguous();  // on the GPU
  Tensor out = tensor::empty(c.shape(), c.dtype());
  Gpu gpu = gpuOf(c);
  gpu.copyToHost(out.rawData(), address(c), dtypeBytes(c.dtype(), c.numel()), gpu.stream());
  gpu.synchronize();
  return out;
}

void evalLazy(const Lazy::Node& root, const Tensor& out) {
  const DevicePtr device = deviceOf(root, &out);
  if (out.numel() == 0) return;
  const ElementwisePlan plan = planElementwise(root);
  std::vector<uint64_t> leaves;
  for (const auto* leaf : plan.leaves) leaves.push_back(address(leaf->tensor));
  std::vector<uint64_t> params = elementwiseParams(plan, address(out), leaves);
  void* args[] = {params.data()};
  const size_t sizes[] = {params.size() * sizeof(uint64_t)};  // one parameter: the plan's words
  Gpu gpu(device);
  gpu.kernel(plan.source, kElementwiseKernel)
      .launch({blocksFor(plan.numel, device, kThreads * 4)}, {kThreads}, 0, gpu.stream(), args, sizes);
}

void reduceRows(cpu::ReduceOp op, const Tensor& x, int64_t rows, int64_t n, const Tensor& out, int mode) {
  const DevicePtr device = deviceOf("reduce", {&x, &out});
  if (rows == 0) return;
  const int opCode = static_cast<int>(op);
  if (x.dtype() == DType::I64) {
    launch(device, "gz_reduce_i64", {static_cast<unsigned>(rows)}, {kThreads}, address(x), address(out), rows, n, opCode);
    return;
  }
  const int64_t chunks = (n + cpu::kReduceChunk - 1) / cpu::kReduceChunk;
  Tensor partial = empty({std::max<int64_t>(rows * chunks, 1)}, DType::F32, device);
  const uint64_t noCenters = 0;
  if (chunks > 0)
    launch(device, "gz_reduce_chunks", {static_cast<unsigned>((rows * chunks * 16 + kThreads - 1) / kThreads)}, {kThreads},
           address(x), address(partial), noCenters, rows, n, chunks, opCode);
  const int64_t ddof = 0;
  launch(device, "gz_reduce_finish", {static_cast<unsigned>((rows + kThreads - 1) / kThreads)}, {kThreads},
         address(partial), address(out), rows, n, chunks, opCode, mode, ddof);
}

void varianceRows(const Tensor& x, int64_t rows, int64_t n, int64_t ddof, const Tensor& out) {
  const DevicePtr device = deviceOf("variance", {&x, &out});
  if (rows == 0) return;
  const int64_t chunks = (n + cpu::kReduceChunk - 1) / cpu::kReduceChunk;
  Tensor partial = empty({std::max<int64_t>(rows * chunks, 1)}, DType::F32, device);
  Tensor means = empty({rows}, DType::F32, device);
  const unsigned chunkBlocks = static_cast<unsigned>((rows * chunks * 16 + kThreads - 1) / kThreads);
  const unsigned rowBlocks = static_cast<unsigned>((rows + kThreads - 1) / kThreads);
  const uint64_t noCenters = 0;
  const int sum = 0, ssd = 4, plain = 0, mean = 1, var = 2;
  const int64_t zero = 0;
  if (chunks > 0)
    launch(device, "gz_reduce_chunks", {chunkBlocks}, {kThreads}, address(x), address(partial), noCenters, rows, n, chunks, sum);
  launch(device, "gz_reduce_finish", {rowBlocks}, {kThreads}, address(partial), address(means), rows, n, chunks, sum,
         n > 0 ? mean : plain, zero);
  if (chunks > 0)
    launch(device, "gz_reduce_chunks", {chunkBlocks}, {kThreads}, address(x), address(partial), address(means), rows, n,
           chunks, ssd);
  launch(device, "gz_reduce_finish", {rowBlocks}, {kThreads}, address(partial), address(out), rows, n, chunks, ssd, var, ddof);
}

void argExtremeRows(const Tensor& x, int64_t rows, int64_t n, bool isMax, const Tensor& out) {
  const DevicePtr device = deviceOf("argmax", {&x, &out});
  if (rows == 0) return;
  const int flag = isMax ? 1 : 0;
  launch(device, x.dtype() == DType::F32 ? "gz_arg_f32" : "gz_arg_i64", {static_cast<unsigned>(rows)}, {kThreads}, address(x),
         address(out), n, flag);
}

void softmaxRows(const Tensor& x, int64_t rows, int64_t n, bool log, const Tensor& out) {
  const DevicePtr device = deviceOf("softmax", {&x, &out});
  if (rows == 0 || n == 0) return;
  const int flag = log ? 1 : 0;
  launch(device, "gz_softmax", {static_cast<unsigned>(rows)}, {kThreads}, address(x), address(out), n, flag);
}

void cumsumRows(const Tensor& x, int64_t rows, int64_t n, const Tensor& out) {
  const DevicePtr device = deviceOf("cumsum", {&x, &out});
  if (rows == 0) return;
  launch(device, "gz_cumsum_f32", {static_cast<unsigned>((rows + kThreads - 1) / kThreads)}, {kThreads}, address(x),
         address(out), rows, n);
}

void cumsumI64(const Tensor& work, int64_t outer, int64_t n, int64_t inner) {
  const DevicePtr device = deviceOf("cumsum", {&work});
  if (outer * inner == 0) return;
  launch(device, "gz_cumsum_i64", {static_cast<unsigned>((outer * inner + kThreads - 1) / kThreads)}, {kThreads},
         address(work), outer, n, inner);
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const DevicePtr device = deviceOf("matmul", {&a, &b, &out});
  const int64_t rank = out.ndim();
  const int64_t m = out.shape()[rank - 2], n = out.shape()[rank - 1], k = a.shape()[rank - 1];
  const int64_t batches = out.numel() / std::max<int64_t>(m * n, 1);
  if (out.numel() == 0) return;
  check(batches <= 65535, "matmul on the GPU: " + std::to_string(batches) + " batches exceed 65535");
  std::vector<int64_t> aOff(static_cast<size_t>(batches)), bOff(static_cast<size_t>(batches));
  for (int64_t i = 0; i < batches; ++i) {
    int64_t index = i, oa = 0, ob = 0;
    for (int64_t axis = rank - 3; axis >= 0; --axis) {
      const int64_t c = index % out.shape()[axis];
      index /= out.shape()[axis];
      oa += c * a.strides()[axis];
      ob += c * b.strides()[axis];
    }
    aOff[i] = oa;
    bOff[i] = ob;
  }
  const Tensor aOffsets = upload(aOff, device), bOffsets = upload(bOff, device);
  const int64_t ars = a.strides()[rank - 2], acs = a.strides()[rank - 1], brs = b.strides()[rank - 2], bcs = b.strides()[rank - 1];
  const unsigned z = static_cast<unsigned>(batches);
  auto go = [&](const char* name, Dim3 grid) {
    launch(device, name, grid, {kThreads}, address(a), address(b), address(out), address(aOffsets), address(bOffsets), m, n, k,
           ars, acs, brs, bcs);
  };
  switch (out.dtype()) {
    case DType::F32:
      go("gz_matmul_f32", {static_cast<unsigned>((n + 63) / 64), static_cast<unsigned>((m + 63) / 64), z});
      return;
    case DType::I64:
      go("gz_matmul_i64", {static_cast<unsigned>((n + 15) / 16), static_cast<unsigned>((m + 15) / 16), z});
      return;
    case DType::BF16:
    case DType::F16:
      go(out.dtype() == DType::BF16 ? "gz_matmul_bf16" : "gz_matmul_f16",
         {static_cast<unsigned>((n + 127) / 128), static_cast<unsigned>((m + 127) / 128), z});
      return;
    default:
      throw Error(std::string("matmul on the GPU: no kernel for ") + dtypeName(out.dtype()));
  }
}

void intMatmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const DevicePtr device = deviceOf("intMatmul", {{"a", &a}, {"b", &b}, {"out", &out}});
  check(device != nullptr, "intMatmul on the GPU: the operands are on the host");
  check(a.dtype() == DType::I8 && b.dtype() == DType::I8 && out.dtype() == DType::I32,
        std::string("intMatmul on the GPU: I8 x I8 to I32, not ") + dtypeName(a.dtype()) + " x " + dtypeName(b.dtype()) +
            " to " + dtypeName(out.dtype()));
  check(a.ndim() == 2 && b.ndim() == 2 && out.ndim() == 2 && a.shape()[1] == b.shape()[0] &&
            out.shape()[0] == a.shape()[0] && out.shape()[1] == b.shape()[1],
        "intMatmul on the GPU: shapes " + shapeText(a.shape()) + " x " + shapeText(b.shape()) + " to " +
            shapeText(out.shape()) + " (a [m, k], b [k, n], out [m, n])");
  check(a.isContiguous() && b.isContiguous() && out.isContiguous(), "intMatmul on the GPU: operands must be contiguous");
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  if (out.numel() == 0) return;
  const int64_t rowTiles = (m + 127) / 128, colTiles = (n + 127) / 128;
  check(rowTiles <= 65535,
        "intMatmul on the GPU: " + std::to_string(m) + " rows exceed 65535 tiles of 128");
  launch(device, "gz_matmul_s8", {static_cast<unsigned>(colTiles), static_cast<unsigned>(rowTiles)}, {kThreads}, address(a),
         address(b), address(out), m, n, k);
}

void copyRows(const Tensor& dst, int64_t dstStart, int64_t dstStride, const Tensor& src, int64_t srcStride, int64_t outer,
              int64_t row) {
  const DevicePtr device = deviceOf("concat", {&dst, &src});
  if (outer * row == 0) return;
  const int size = static_cast<int>(dtypeSize(dst.dtype()));
  launch(device, "gz_copy_rows", {blocksFor(outer * row, device)}, {kThreads},
         address(dst) + static_cast<uint64_t>(dstStart * size), address(src), outer, row, dstStride, srcStride, size);
}

void indexSelect(const Tensor& src, const std::vector<int64_t>& idx, int64_t outer, int64_t n, int64_t inner, const Tensor& out) {
  const DevicePtr device = deviceOf("indexSelect", {&src, &out});
  if (out.numel() == 0) return;
  const Tensor indices = upload(idx, device);
  const int size = static_cast<int>(dtypeSize(src.dtype()));
  const int64_t count = static_cast<int64_t>(idx.size());
  launch(device, "gz_index_select", {blocksFor(out.numel(), device)}, {kThreads}, address(out), address(src), address(indices),
         outer, count, n, inner, size);
}

void gather(const Tensor& x, int64_t axis, const std::vector<int64_t>& idx, const Tensor& out) {
  const DevicePtr device = deviceOf("gather", {&x, &out});
  if (out.numel() == 0) return;
  check(x.ndim() <= 16, "gather on the GPU: " + std::to_string(x.ndim()) + " axes exceed 16");
  struct {
    int64_t rank, axis, count, size;
    int64_t shape[16];
    int64_t strides[16];
  } p{};
  p.rank = x.ndim();
  p.axis = axis;
  p.count = out.numel();
  p.size = static_cast<int64_t>(dtypeSize(x.dtype()));
  for (int64_t d = 0; d < x.ndim(); ++d) {
    p.shape[d] = out.shape()[d];
    p.strides[d] = x.strides()[d];
  }
  const Tensor indices = upload(idx, device);
  uint64_t dst = address(out), src = address(x), ind = address(indices);
  void* args[] = {&dst, &src, &ind, &p};
  const size_t sizes[] = {sizeof(dst), sizeof(src), sizeof(ind), sizeof(p)};
  fixed(device, "gz_gather").launch({blocksFor(out.numel(), device)}, {kThreads}, 0, Gpu(device).stream(), args, sizes);
}

}  // namespace gizml::gpuops
