// Tensor: storage, shape, strides, and the views that share storage.
#include <gizml/tensor.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/page_memory.h"
#include "tensor/gpu/tensor_ops.h"
#include "tensor/shape_util.h"

namespace gizml::tensor {
namespace {
std::atomic<uint64_t> storageAllocations{0};
std::atomic<uint64_t> storageLiveBytes{0};
std::atomic<uint64_t> storagePeakBytes{0};

void countLive(int64_t delta) {
  const uint64_t live = storageLiveBytes.fetch_add(static_cast<uint64_t>(delta)) + static_cast<uint64_t>(delta);
  uint64_t peak = storagePeakBytes.load();
  while (live > peak && !storagePeakBytes.compare_exchange_weak(peak, live)) {
  }
}
}  // namespace

std::string shapeText(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Large storages are mapped pages (core/page_memory.h); small ones come from the heap.
Storage::Storage(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  if (rounded >= core::kMappedBytes) {
    data_ = core::mapPages(rounded);
  } else {
    data_ = std::aligned_alloc(64, rounded);
    if (data_) std::memset(data_, 0, rounded);
  }
  if (!data_) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  storageAllocations.fetch_add(1, std::memory_order_relaxed);
  countLive(static_cast<int64_t>(bytes_));
}

Storage::Storage(size_t bytes, const gizhw::gpu::Gpu& gpu)
    : bytes_(bytes), gpu_(gpu.device()), gpuBuffer_(gpu.allocate(bytes)) {
  data_ = reinterpret_cast<void*>(static_cast<uintptr_t>(gpuBuffer_.address()));
  storageAllocations.fetch_add(1, std::memory_order_relaxed);
}

void Storage::notOnHost() const {
  throw Error("tensor memory on " + deviceText() + " read as host memory: copy it with host() first");
}

std::string Storage::deviceText() const { return gpu_ ? gizhw::gpu::Gpu(gpu_).describe() : "cpu"; }

Storage::~Storage() {
  if (gpu_) return;  // gpuBuffer_ goes back to the GPU's cache
  countLive(-static_cast<int64_t>(bytes_));
  const size_t rounded = (std::max<size_t>(bytes_, 1) + 63) / 64 * 64;
  if (rounded >= core::kMappedBytes) core::unmapPages(data_, rounded);
  else std::free(data_);
}

uint64_t Storage::allocations() { return storageAllocations.load(std::memory_order_relaxed); }
uint64_t Storage::liveBytes() { return storageLiveBytes.load(); }
uint64_t Storage::peakBytes() { return storagePeakBytes.load(); }
void Storage::resetPeak() { storagePeakBytes.store(storageLiveBytes.load()); }

Tensor::Tensor() : Tensor(std::make_shared<Storage>(4), DType::F32, {}, {}, 0) {}

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Shape strides,
               int64_t offset)
    : storage_(std::move(storage)), dtype_(dtype), shape_(std::move(shape)),
      strides_(std::move(strides)), offset_(offset) {
  // Made for every view of every operation: the message is built only when the check fails.
  if (shape_.size() != strides_.size()) [[unlikely]]
    throw Error("tensor: shape " + shapeText(shape_) + " and strides " + shapeText(strides_) + " differ in rank");
}

int64_t Tensor::numel() const { return elementCount(shape_); }

int64_t Tensor::size(int64_t axis) const { return shape_[normalizeAxis(axis, ndim(), "size")]; }

bool Tensor::isContiguous() const {
  // An axis of size 1 is never stepped along, so its stride does not matter (a reshape that adds
  // one keeps whatever stride the view rule gives it).
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= std::max<int64_t>(shape_[i], 1);  // as contiguousStrides
  }
  return true;
}

void* Tensor::rawData() const {
  char* base = static_cast<char*>(storage_->data());
  if (dtype_ != DType::I4) return base + offset_ * static_cast<int64_t>(dtypeSize(dtype_));
  check(offset_ % 2 == 0, "rawData: an i4 tensor starting in the middle of a byte has no address");
  return base + offset_ / 2;
}

Tensor Tensor::view(const char* op, Shape shape, Shape strides, int64_t offset) const {
  if (dtype_ == DType::I4) {
    const std::string problem = i4ViewProblem(shape, strides, offset);
    check(problem.empty(), std::string(op) + ": this view of an i4 tensor " + problem +
                               "; i4 packs two elements a byte (copy it with cast(i8) first)");
  }
  return Tensor(storage_, dtype_, std::move(shape), std::move(strides), offset);
}

Tensor Tensor::reshape(const Shape& requested) const {
  const Shape shape = inferShape(requested, numel());
  if (auto strides = viewStrides(shape_, strides_, shape))
    if (dtype_ != DType::I4 || i4ViewProblem(shape, *strides, offset_).empty())
      return Tensor(storage_, dtype_, shape, *strides, offset_);
  return contiguous().reshape(shape);
}

Tensor Tensor::permute(const Axes& axes) const {
  check(static_cast<int64_t>(axes.size()) == ndim(),
        "permute: axes " + shapeText(axes) + " do not match the rank of shape " + shapeText(shape_));
  Shape shape(axes.size()), strides(axes.size());
  std::vector<bool> seen(axes.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = normalizeAxis(axes[i], ndim(), "permute");
    check(!seen[a], "permute: axis " + std::to_string(axes[i]) + " repeated in " + shapeText(axes));
    seen[a] = true;
    shape[i] = shape_[a];
    strides[i] = strides_[a];
  }
  return view("permute", shape, strides, offset_);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  Axes axes(ndim());
  for (int64_t i = 0; i < ndim(); ++i) axes[i] = i;
  std::swap(axes[normalizeAxis(a, ndim(), "transpose")], axes[normalizeAxis(b, ndim(), "transpose")]);
  return permute(axes);
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  const int64_t ax = normalizeAxis(axis, ndim(), "slice");
  if (step == 0) [[unlikely]]
    throw Error("slice: step 0 on axis " + std::to_string(axis));
  const int64_t n = shape_[ax];
  // Python's slice.indices: negative indices count from the end, then clamp.
  auto clampIndex = [&](int64_t i, int64_t low, int64_t high) {
    if (i < 0) i += n;
    return std::clamp(i, low, high);
  };
  int64_t length;
  if (step > 0) {
    start = clampIndex(start, 0, n);
    stop = clampIndex(stop, 0, n);
    length = stop > start ? (stop - start + step - 1) / step : 0;
  } else {
    start = clampIndex(start, -1, n - 1);
    stop = clampIndex(stop, -1, n - 1);
    length = start > stop ? (start - stop - step - 1) / (-step) : 0;
  }
  Shape shape = shape_, strides = strides_;
  shape[ax] = length;
  strides[ax] = strides_[ax] * step;
  const int64_t offset = length > 0 ? offset_ + start * strides_[ax] : offset_;
  return view("slice", shape, strides, offset);
}

Tensor Tensor::expand(const Shape& shape) const {
  return view("expand", shape, broadcastStrides(shape_, strides_, shape), offset_);
}

Tensor Tensor::squeeze(int64_t axis) const {
  const int64_t ax = normalizeAxis(axis, ndim(), "squeeze");
  check(shape_[ax] == 1, "squeeze: axis " + std::to_string(axis) + " of shape " + shapeText(shape_) +
                             " has length " + std::to_string(shape_[ax]) + ", not 1");
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + ax);
  strides.erase(strides.begin() + ax);
  return Tensor(storage_, dtype_, shape, strides, offset_);
}

Tensor Tensor::squeeze() const {
  Shape shape, strides;
  for (int64_t i = 0; i < ndim(); ++i)
    if (shape_[i] != 1) {
      shape.push_back(shape_[i]);
      strides.push_back(strides_[i]);
    }
  return Tensor(storage_, dtype_, shape, strides, offset_);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  const int64_t ax = normalizeAxis(axis, ndim() + 1, "unsqueeze");
  Shape shape = shape_, strides = strides_;
  const int64_t stride = ax < ndim() ? strides_[ax] * shape_[ax] : 1;
  shape.insert(shape.begin() + ax, 1);
  strides.insert(strides.begin() + ax, stride);
  return Tensor(storage_, dtype_, shape, strides, offset_);
}

Tensor Tensor::on(const gizhw::gpu::Gpu& gpu) const {
  check(!gpu.closed(), "on: GPU " + gpu.describe() + " was closed");
  check(dtype_ != DType::F64, "on: a tensor of dtype f64 cannot go to GPU " + gpu.describe() +
                                  ": f64 runs only on the CPU (cast it to f32 first)");
  if (storage_->gpu() == gpu.device()) return *this;
  return gpuops::toDevice(onGpu() ? host() : *this, gpu);
}

Tensor Tensor::host() const { return onGpu() ? gpuops::toHost(*this) : *this; }

Tensor Tensor::contiguous() const { return isContiguous() ? *this : clone(); }

Tensor Tensor::clone() const { return lazy(*this).eval(); }

Tensor Tensor::cast(DType dtype) const {
  return dtype == dtype_ ? *this : lazy(*this).cast(dtype).eval();
}

double Tensor::item() const {
  check(numel() == 1, "item: tensor of shape " + shapeText(shape_) + " holds " +
                          std::to_string(numel()) + " elements, not 1");
  return toDoubles()[0];
}

std::vector<double> Tensor::toDoubles() const {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(numel()));
  if (dtype_ == DType::F64) {
    if (onGpu()) return host().toDoubles();
    const Tensor c = contiguous();
    out.assign(c.data<double>(), c.data<double>() + c.numel());
  } else if (isFloat(dtype_) || dtype_ == DType::Bool) {
    for (float v : toFloats()) out.push_back(v);
  } else {
    for (int64_t v : toInts()) out.push_back(static_cast<double>(v));
  }
  return out;
}

std::vector<float> Tensor::toFloats() const {
  if (onGpu()) return host().toFloats();
  // cast() returns the tensor itself when the dtype already matches, which may be a strided view.
  const Tensor c = cast(DType::F32).contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

std::vector<int64_t> Tensor::toInts() const {
  if (onGpu()) return host().toInts();
  const Tensor c = cast(DType::I64).contiguous();
  return std::vector<int64_t>(c.data<int64_t>(), c.data<int64_t>() + c.numel());
}

}  // namespace gizml::tensor
