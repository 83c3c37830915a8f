#include "llm/ops/gpu/weight_upload.h"

#include <gizml/error.h>

#include <algorithm>
#include <cstring>

#include "core/progress.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::llm::ops {

WeightUpload::WeightUpload(const gizhw::gpu::Gpu& gpu, uint64_t totalBytes, size_t chunkBytes)
    : gpu_(gpu), total_(totalBytes), chunkBytes_(chunkBytes) {
  check(chunkBytes_ > 0, "WeightUpload: staging buffers of 0 bytes");
}

WeightUpload::~WeightUpload() {
  // A destructor must not throw; a GPU that fails the wait (closed, or broken) runs no copy that
  // could still read a staging buffer.
  try {
    if (!gpu_.closed()) waitForCopies();
  } catch (const Error&) {
  }
}

bool WeightUpload::staged() {
  if (direct_ || !staging_.empty()) return !direct_;
  try {
    for (int i = 0; i < kStagingBuffers; ++i) staging_.push_back({gpu_.allocatePinned(chunkBytes_), gpu_.newEvent()});
  } catch (const Error&) {
    // The driver refused pinned memory (cuMemHostAlloc fails past the locked-memory limit, or
    // with none left): the bytes go up straight from the mapped file, which the driver stages
    // itself. Slower, never an error.
    staging_.clear();
    direct_ = true;
  }
  return !direct_;
}

void WeightUpload::copy(uint64_t dst, std::span<const uint8_t> bytes) {
  if (bytes.empty()) return;
  if (!progress_) progress_ = std::make_unique<core::ProgressBar>("upload " + gpu_.describe(), static_cast<int64_t>(total_));
  if (!staged()) {
    gpu_.copyToDevice(dst, bytes.data(), bytes.size(), gpu_.stream());
    return advance(bytes.size());
  }
  for (size_t at = 0; at < bytes.size(); at += chunkBytes_) {
    const size_t n = std::min(chunkBytes_, bytes.size() - at);
    Staging& s = staging_[next_];
    next_ = (next_ + 1) % staging_.size();
    if (s.inFlight) s.copied.synchronize();  // the buffer's last copy is done: it may be refilled
    std::memcpy(s.buffer.data(), bytes.data() + at, n);
    gpu_.copyToDevice(dst + at, s.buffer, 0, n, gpu_.stream());
    s.copied.record(gpu_.stream());
    s.inFlight = true;
    advance(n);
  }
}

tensor::Tensor WeightUpload::tensor(std::span<const uint8_t> bytes, const tensor::Shape& shape, DType dtype) {
  tensor::Tensor t = gpuops::empty(shape, dtype, gpu_.device());
  check(dtypeBytes(dtype, t.numel()) == bytes.size(), "upload: " + std::to_string(bytes.size()) + " bytes do not fill " +
                                                          tensor::shapeText(shape) + " of " + dtypeName(dtype));
  copy(gpuops::address(t), bytes);
  return t;
}

void WeightUpload::advance(size_t bytes) {
  done_ += bytes;
  progress_->update(static_cast<int64_t>(done_), "");
}

void WeightUpload::waitForCopies() {
  for (Staging& s : staging_) {
    if (s.inFlight) s.copied.synchronize();
    s.inFlight = false;
  }
}

void WeightUpload::finish() {
  waitForCopies();
  staging_.clear();
  if (!progress_) return;
  progress_->update(static_cast<int64_t>(total_), "");
  progress_.reset();
}

void WeightUploads::add(const gizhw::gpu::Gpu& gpu, uint64_t totalBytes) {
  uploads_.push_back(std::make_unique<WeightUpload>(gpu, totalBytes));
}

WeightUpload& WeightUploads::of(const gizhw::gpu::Gpu& gpu) const {
  for (const std::unique_ptr<WeightUpload>& upload : uploads_)
    if (upload->gpu() == gpu) return *upload;
  throw Error("weights placed on " + gpu.describe() + ", to which their load uploads nothing");
}

void WeightUploads::finish() {
  for (const std::unique_ptr<WeightUpload>& upload : uploads_) upload->finish();
}

}  // namespace gizml::llm::ops
