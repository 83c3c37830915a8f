#pragma once
// A model's weights going up to a GPU at load: each tensor's stored bytes are copied from the
// mapped file into a pinned staging buffer and from there to the device on the GPU's stream, the
// buffers in turn, so reading the file (which pages it in) overlaps the DMA of the chunk before.
// A progress bar on stderr follows the bytes. Nothing of the weights stays in host memory: the
// staging buffers are freed when the load finishes.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace gizml::core {
class ProgressBar;
}

namespace gizml::llm::ops {

/// The bytes of a staging buffer: a copy's fixed cost (a driver call, the DMA's start, ~10 us)
/// is about 1% of moving 16 MiB over PCIe (0.3 to 1 ms at 16 to 50 GB/s), while two buffers pin
/// only 32 MiB of host memory, which a system's locked-memory limit rarely refuses.
inline constexpr size_t kStagingBytes = size_t{16} << 20;
/// Two: the file is read into one while the other's copy runs, and reading is the slower side.
inline constexpr int kStagingBuffers = 2;

/// The uploads of one load to one GPU.
class WeightUpload {
 public:
  /// Its progress bar, "upload cuda:0", runs over totalBytes.
  WeightUpload(const gizhw::gpu::Gpu& gpu, uint64_t totalBytes, size_t chunkBytes = kStagingBytes);
  /// Waits for the copies still running (their staging buffers are freed after).
  ~WeightUpload();
  WeightUpload(const WeightUpload&) = delete;
  WeightUpload& operator=(const WeightUpload&) = delete;

  const gizhw::gpu::Gpu& gpu() const { return gpu_; }
  /// Queues a copy of `bytes` to the device address dst. On return they have been read (into
  /// staging, or by the driver), so their mapped pages may be released.
  void copy(uint64_t dst, std::span<const uint8_t> bytes);
  /// `bytes` as a new tensor of `shape` and `dtype` on the GPU; an Error when they do not fill it.
  tensor::Tensor tensor(std::span<const uint8_t> bytes, const tensor::Shape& shape, DType dtype);
  /// Waits for every copy, frees the staging buffers and draws the bar full (its total may
  /// count bytes that never went up).
  void finish();
  /// The bytes copied so far.
  uint64_t bytes() const { return done_; }

 private:
  struct Staging {
    gizhw::gpu::PinnedBuffer buffer;
    gizhw::gpu::Event copied;  // recorded after the copy out of it
    bool inFlight = false;
  };
  /// The staging buffers, made on first use; false when the driver refuses pinned memory.
  bool staged();
  void waitForCopies();
  void advance(size_t bytes);

  gizhw::gpu::Gpu gpu_;
  uint64_t total_;
  size_t chunkBytes_;
  std::vector<Staging> staging_;
  size_t next_ = 0;  // the staging buffer the next chunk goes through
  bool direct_ = false;
  uint64_t done_ = 0;
  std::unique_ptr<core::ProgressBar> progress_;  // from the first copy to finish()
};

/// A load's uploads: one WeightUpload per GPU it places layers on (a model on one GPU, or in
/// stages across several), finished together when its layers are made.
class WeightUploads {
 public:
  void add(const gizhw::gpu::Gpu& gpu, uint64_t totalBytes);
  /// gpu's; an Error naming it where the load has none.
  WeightUpload& of(const gizhw::gpu::Gpu& gpu) const;
  void finish();

 private:
  std::vector<std::unique_ptr<WeightUpload>> uploads_;
};

}  // namespace gizml::llm::ops
