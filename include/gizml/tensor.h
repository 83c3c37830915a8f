#pragma once
// gizml::tensor: n-dimensional arrays on the CPU (and, later, GPUs), their views, operations and
// fused lazy elementwise chains. Spec: Step 1 of the guide; rules in docs/tensor.md.
#include <gizhw/gpu.h>
#include <gizml/dtype.h>
#include <gizml/error.h>
#include <gizml/ops.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace gizml::tensor {

using Shape = std::vector<int64_t>;
using Axes = std::vector<int64_t>;

/// "[2, 3]": shapes and axes in error messages.
std::string shapeText(const Shape& shape);

/// Bytes of one device's memory, shared by every view of them.
class Storage {
 public:
  explicit Storage(size_t bytes);  // zero-filled CPU memory, 64-byte aligned
  /// Uninitialised memory of a GPU, from its caching allocator.
  Storage(size_t bytes, const gizhw::gpu::Gpu& gpu);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// The host address of CPU memory (an Error for GPU memory: CPU code must not read it).
  void* data() const {
    if (gpu_) [[unlikely]] notOnHost();
    return data_;
  }
  size_t bytes() const { return bytes_; }
  bool onGpu() const { return gpu_ != nullptr; }
  /// The GPU holding the bytes (null on the CPU).
  const std::shared_ptr<gizhw::gpu::Device>& gpu() const { return gpu_; }
  /// The device address of GPU memory.
  uint64_t deviceAddress() const { return gpuBuffer_.address(); }
  /// "cpu" or "cuda:0 (NVIDIA H200)".
  std::string deviceText() const;

  /// Storages allocated by this process so far; tests use it to prove that fusion allocates
  /// nothing but its result.
  static uint64_t allocations();
  /// Bytes of storage alive now, and the most alive at once since resetPeak().
  static uint64_t liveBytes();
  static uint64_t peakBytes();
  static void resetPeak();

 private:
  [[noreturn]] void notOnHost() const;
  void* data_ = nullptr;
  size_t bytes_;
  std::shared_ptr<gizhw::gpu::Device> gpu_;
  gizhw::gpu::Buffer gpuBuffer_;
};

class Tensor;

/// A counter-based random key (Philox 4x32-10): the same key gives the same values on every
/// device and thread count. split(i) derives independent keys.
struct Key {
  uint64_t seed = 0;
  Key() = default;
  explicit Key(uint64_t s) : seed(s) {}
  Key split(uint64_t index) const;
};

class Lazy;

class Tensor {
 public:
  /// An empty 0-d F32 tensor holding 0.
  Tensor();
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Shape strides, int64_t offset);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  /// Strides in elements (not bytes); 0 for broadcast axes.
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;
  /// The length of axis (negative counts from the end).
  int64_t size(int64_t axis) const;
  bool isContiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Devices (Step 2). Operations run where their operands are; operands on two devices are an
  // Error naming both.
  /// A copy on the GPU (the tensor itself when it is already there).
  Tensor on(const gizhw::gpu::Gpu& gpu) const;
  /// A copy in host memory (the tensor itself when it is already there); waits for the GPU.
  Tensor host() const;
  bool onGpu() const { return storage_->onGpu(); }
  /// "cpu" or "cuda:0 (NVIDIA H200)".
  std::string device() const { return storage_->deviceText(); }

  /// The host address of the first element (offset applied; I4: the byte holding it, which it
  /// starts); an Error for GPU tensors.
  void* rawData() const;
  template <class T>
  T* data() const { return static_cast<T*>(rawData()); }

  // Views: no copy, the same storage. An I4 view must not split a byte: an Error names the
  // op, except reshape, which copies instead.
  Tensor reshape(const Shape& shape) const;  // one axis may be -1; copies only if not viewable
  Tensor permute(const Axes& axes) const;
  Tensor transpose(int64_t a, int64_t b) const;
  /// Python-style slice of one axis: negative indices count from the end, bounds clamp.
  Tensor slice(int64_t axis, int64_t start, int64_t stop, int64_t step = 1) const;
  Tensor expand(const Shape& shape) const;  // NumPy broadcast_to
  Tensor squeeze(int64_t axis) const;
  Tensor squeeze() const;  // every axis of length 1
  Tensor unsqueeze(int64_t axis) const;
  Tensor contiguous() const;  // itself when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy

  /// Conversion to another dtype (docs/tensor.md: round to nearest even, saturating ints);
  /// the tensor itself when it already has that dtype.
  Tensor cast(DType dtype) const;

  // Elementwise (NumPy broadcasting and promotion; docs/tensor.md).
  Tensor neg() const; Tensor abs() const; Tensor exp() const; Tensor log() const;
  Tensor sqrt() const; Tensor rsqrt() const; Tensor sin() const; Tensor cos() const;
  Tensor tanh() const; Tensor sigmoid() const; Tensor relu() const; Tensor silu() const;
  Tensor gelu() const;  // erf form
  Tensor geluTanh() const;
  Tensor floor() const; Tensor ceil() const; Tensor round() const; Tensor sign() const;
  Tensor add(const Tensor& o) const; Tensor sub(const Tensor& o) const;
  Tensor mul(const Tensor& o) const; Tensor div(const Tensor& o) const;
  Tensor pow(const Tensor& o) const; Tensor min(const Tensor& o) const;
  Tensor max(const Tensor& o) const; Tensor mod(const Tensor& o) const;
  Tensor eq(const Tensor& o) const; Tensor ne(const Tensor& o) const;
  Tensor lt(const Tensor& o) const; Tensor le(const Tensor& o) const;
  Tensor gt(const Tensor& o) const; Tensor ge(const Tensor& o) const;

  // Reductions over axes (empty: all axes), in the orders of docs/tensor.md.
  Tensor sum(const Axes& axes = {}, bool keepdim = false) const;
  Tensor mean(const Axes& axes = {}, bool keepdim = false) const;
  Tensor max(const Axes& axes = {}, bool keepdim = false) const;
  Tensor min(const Axes& axes = {}, bool keepdim = false) const;
  Tensor prod(const Axes& axes = {}, bool keepdim = false) const;
  Tensor variance(const Axes& axes = {}, bool keepdim = false, int64_t ddof = 0) const;
  Tensor argmax(int64_t axis, bool keepdim = false) const;
  Tensor argmin(int64_t axis, bool keepdim = false) const;
  Tensor softmax(int64_t axis = -1) const;
  Tensor logSoftmax(int64_t axis = -1) const;
  Tensor cumsum(int64_t axis) const;

  Tensor matmul(const Tensor& o) const;
  Tensor indexSelect(int64_t axis, const Tensor& indices) const;

  /// The values as text: nested brackets, shortest round-trip numbers ("[[2, 2.5], [5, 5.5]]").
  std::string text() const;
  /// The single element as a double; the tensor must hold exactly one.
  double item() const;
  /// All elements in row-major order, converted.
  std::vector<double> toDoubles() const;
  std::vector<float> toFloats() const;
  std::vector<int64_t> toInts() const;

 private:
  /// This tensor's storage seen as (shape, strides, offset): an Error naming op when the tensor
  /// is I4 and the view would split a byte (docs/tensor.md, "I4").
  Tensor view(const char* op, Shape shape, Shape strides, int64_t offset) const;

  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::F32;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
};

// Creation.
Tensor empty(const Shape& shape, DType dtype = DType::F32);  // contents unspecified (zeroed)
Tensor tensor(const Shape& shape, const std::vector<double>& values, DType dtype = DType::F32);
Tensor zeros(const Shape& shape, DType dtype = DType::F32);
Tensor ones(const Shape& shape, DType dtype = DType::F32);
Tensor full(const Shape& shape, double value, DType dtype = DType::F32);
Tensor scalar(double value, DType dtype = DType::F32);
/// [start, stop) by step, like numpy.arange; F32 unless dtype says otherwise.
Tensor arange(double start, double stop, double step = 1.0, DType dtype = DType::F32);
/// count values from start to stop inclusive, like numpy.linspace.
Tensor linspace(double start, double stop, int64_t count, DType dtype = DType::F32);
/// Uniform in [low, high) and normal (mean, std) values, from a Key (docs/tensor.md).
Tensor uniform(const Key& key, const Shape& shape, double low = 0.0, double high = 1.0,
               DType dtype = DType::F32);
Tensor normal(const Key& key, const Shape& shape, double mean = 0.0, double std = 1.0,
              DType dtype = DType::F32);

// Operations as free functions (the methods above call these).
Tensor unary(UnaryOp op, const Tensor& x);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);
/// a [m, k] I8 times b [k, n] I8: [m, n] I32, each the exact sum of its k products (wrapping past
/// 2^31, as torch._int_mm), on a GPU's INT8 matrix cores or the CPU's integer dot products (VNNI,
/// AVX2). On the CPU, b is read in place when it is a transposed view of [n, k] rows (a linear's
/// weight codes as stored).
Tensor intMatmul(const Tensor& a, const Tensor& b);
Tensor concat(const std::vector<Tensor>& tensors, int64_t axis);
Tensor stack(const std::vector<Tensor>& tensors, int64_t axis);
/// out[i][j] = x[indices[i][j]][j] along axis (torch.gather): indices has x's rank.
Tensor gather(const Tensor& x, int64_t axis, const Tensor& indices);
Tensor indexSelect(const Tensor& x, int64_t axis, const Tensor& indices);
/// dst[...] = src: src broadcast to dst's shape and cast to its dtype, written through dst's
/// strides (dst may be a view: a slice of a larger tensor is filled in place).
void assign(const Tensor& dst, const Tensor& src);
/// The shape both broadcast to, or an Error naming them.
Shape broadcastShapes(const Shape& a, const Shape& b);

/// A node of a fused elementwise expression. Build with lazy(), eval() runs it in one pass.
class Lazy {
 public:
  struct Node;
  /// A product not yet computed (src/tensor/lazy_node.h): a leaf whose elementwise tail runs in
  /// its store (netops::lazyConv).
  struct Product;
  explicit Lazy(const Tensor& t);
  /// The deferred product as an F32 leaf of `shape`.
  static Lazy deferred(std::shared_ptr<const Product> product, const Shape& shape);
  /// A weak scalar: it takes the type of the other operand (a float turns ints into F32).
  Lazy(double value);  // NOLINT(google-explicit-constructor): `x * 2.0` reads naturally

  DType dtype() const;
  const Shape& shape() const;

  Lazy unary(UnaryOp op) const;
  Lazy binary(BinaryOp op, const Lazy& o) const;
  Lazy cast(DType dtype) const;

  Lazy neg() const { return unary(UnaryOp::Neg); }
  Lazy abs() const { return unary(UnaryOp::Abs); }
  Lazy exp() const { return unary(UnaryOp::Exp); }
  Lazy log() const { return unary(UnaryOp::Log); }
  Lazy sqrt() const { return unary(UnaryOp::Sqrt); }
  Lazy rsqrt() const { return unary(UnaryOp::Rsqrt); }
  Lazy sin() const { return unary(UnaryOp::Sin); }
  Lazy cos() const { return unary(UnaryOp::Cos); }
  Lazy tanh() const { return unary(UnaryOp::Tanh); }
  Lazy sigmoid() const { return unary(UnaryOp::Sigmoid); }
  Lazy relu() const { return unary(UnaryOp::Relu); }
  Lazy silu() const { return unary(UnaryOp::Silu); }
  Lazy gelu() const { return unary(UnaryOp::GeluErf); }
  Lazy geluTanh() const { return unary(UnaryOp::GeluTanh); }
  Lazy floor() const { return unary(UnaryOp::Floor); }
  Lazy ceil() const { return unary(UnaryOp::Ceil); }
  Lazy round() const { return unary(UnaryOp::Round); }
  Lazy sign() const { return unary(UnaryOp::Sign); }
  Lazy add(const Lazy& o) const { return binary(BinaryOp::Add, o); }
  Lazy sub(const Lazy& o) const { return binary(BinaryOp::Sub, o); }
  Lazy mul(const Lazy& o) const { return binary(BinaryOp::Mul, o); }
  Lazy div(const Lazy& o) const { return binary(BinaryOp::Div, o); }
  Lazy pow(const Lazy& o) const { return binary(BinaryOp::Pow, o); }
  Lazy min(const Lazy& o) const { return binary(BinaryOp::Min, o); }
  Lazy max(const Lazy& o) const { return binary(BinaryOp::Max, o); }
  Lazy mod(const Lazy& o) const { return binary(BinaryOp::Mod, o); }
  Lazy eq(const Lazy& o) const { return binary(BinaryOp::Eq, o); }
  Lazy ne(const Lazy& o) const { return binary(BinaryOp::Ne, o); }
  Lazy lt(const Lazy& o) const { return binary(BinaryOp::Lt, o); }
  Lazy le(const Lazy& o) const { return binary(BinaryOp::Le, o); }
  Lazy gt(const Lazy& o) const { return binary(BinaryOp::Gt, o); }
  Lazy ge(const Lazy& o) const { return binary(BinaryOp::Ge, o); }

  /// Computes the expression in one pass over its operands into a new contiguous tensor.
  Tensor eval() const;
  /// The same into `out`, a contiguous tensor of this shape and dtype (no allocation).
  void evalInto(const Tensor& out) const;

  const std::shared_ptr<const Node>& node() const { return node_; }

 private:
  explicit Lazy(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  friend Lazy where(const Lazy& condition, const Lazy& a, const Lazy& b);
  std::shared_ptr<const Node> node_;
};

Lazy lazy(const Tensor& t);
Lazy where(const Lazy& condition, const Lazy& a, const Lazy& b);

inline Lazy operator+(const Lazy& a, const Lazy& b) { return a.add(b); }
inline Lazy operator-(const Lazy& a, const Lazy& b) { return a.sub(b); }
inline Lazy operator*(const Lazy& a, const Lazy& b) { return a.mul(b); }
inline Lazy operator/(const Lazy& a, const Lazy& b) { return a.div(b); }
inline Lazy operator-(const Lazy& a) { return a.neg(); }

}  // namespace gizml::tensor

namespace gizml {
namespace T = tensor;  // the spec's `T.` prefix: T::tensor, T::lazy, T::zeros
}
