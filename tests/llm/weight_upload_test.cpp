// Weights going up to a GPU through pinned staging (llm/ops/gpu/weight_upload.h), on the first
// GPU (in CI the host GPU emulator, ctest entry emulator_test_llm; skipped without one): the
// bytes that arrive are the source's across chunk boundaries, every copy of a model's load comes
// from pinned memory, and neither the staging buffers nor a host copy of the weights outlive it.
// The emulator runs each copy when it is queued, so what these show is the bytes and the
// counters, not copies overlapping the reads.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/gpu_checks.h"
#include "llm/language_model.h"
#include "llm/ops/gpu/weight_upload.h"
#include "llm/quant/converted_model.h"
#include "model_reference.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

class GpuWeightUpload : public test::GpuTest {
 protected:
  // n bytes that differ from those of any other seed or offset (a byte of a period of 251).
  static std::vector<uint8_t> bytesOf(size_t n, int seed) {
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>((i * 7 + static_cast<size_t>(seed) * 31) % 251);
    return bytes;
  }
  static std::vector<uint8_t> hostBytes(const tensor::Tensor& t) {
    const tensor::Tensor host = t.host();
    const auto* p = host.data<uint8_t>();
    return {p, p + host.numel()};
  }
};

// Tensors of 0, 1, a chunk - 1, a chunk and 2.5 chunks, then more in a row, through one upload
// with 4 KiB chunks: each staging buffer is refilled while the copy out of the other may still
// run. Each arrives whole, every byte through the staging buffers, one copy a chunk.
TEST_F(GpuWeightUpload, BytesThroughStagingAreTheSourceBytes) {
  constexpr size_t kChunk = 4096;
  const std::vector<size_t> sizes = {0, 1, kChunk - 1, kChunk, kChunk * 5 / 2, 3 * kChunk + 17, 1, kChunk};
  uint64_t total = 0, chunks = 0;
  for (size_t n : sizes) total += n, chunks += (n + kChunk - 1) / kChunk;
  const uint64_t pinnedBefore = gpu().allocatorStats().pinnedBytes;
  const gizhw::gpu::Activity before = gpu().activity();
  ops::WeightUpload upload(gpu(), total, kChunk);
  std::vector<std::vector<uint8_t>> sources;
  std::vector<tensor::Tensor> placed;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sources.push_back(bytesOf(sizes[i], static_cast<int>(i)));
    placed.push_back(upload.tensor(sources.back(), {static_cast<int64_t>(sizes[i])}, DType::U8));
  }
  EXPECT_EQ(gpu().allocatorStats().pinnedBytes, pinnedBefore + ops::kStagingBuffers * kChunk);
  upload.finish();
  EXPECT_EQ(gpu().allocatorStats().pinnedBytes, pinnedBefore) << "the staging buffers end with the upload";
  const gizhw::gpu::Activity after = gpu().activity();
  EXPECT_EQ(upload.bytes(), total);
  EXPECT_EQ(after.bytesToDevice - before.bytesToDevice, total);
  EXPECT_EQ(after.pinnedBytesToDevice - before.pinnedBytesToDevice, total);
  EXPECT_EQ(after.copiesToDevice - before.copiesToDevice, chunks);
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(hostBytes(placed[i]), sources[i]) << sizes[i] << " bytes";
}

// Staging buffers the driver cannot pin (4 EiB): the bytes go up directly, with no error.
TEST_F(GpuWeightUpload, RefusedPinnedMemoryFallsBackToDirectCopies) {
  const std::vector<uint8_t> source = bytesOf(10000, 3);
  const gizhw::gpu::Activity before = gpu().activity();
  ops::WeightUpload upload(gpu(), source.size(), size_t{1} << 62);
  const tensor::Tensor placed = upload.tensor(source, {static_cast<int64_t>(source.size())}, DType::U8);
  upload.finish();
  const gizhw::gpu::Activity after = gpu().activity();
  EXPECT_EQ(after.bytesToDevice - before.bytesToDevice, source.size());
  EXPECT_EQ(after.pinnedBytesToDevice, before.pinnedBytesToDevice);
  EXPECT_EQ(hostBytes(placed), source);
}

TEST_F(GpuWeightUpload, BytesThatDoNotFillTheShapeAreAnError) {
  ops::WeightUpload upload(gpu(), 12);
  const std::vector<uint8_t> source = bytesOf(12, 0);
  expectError([&] { upload.tensor(source, {2, 2}, DType::F32); }, {"upload", "12 bytes", "[2, 2]", "f32"});
}

// A tiny model (llama, f32) loaded on the GPU: every byte its load copies to the device comes
// from pinned staging (all its tensors but the embedding, which stays in the file, and RoPE's
// frequencies), and afterwards the host holds neither the staging buffers nor the weights.
TEST_F(GpuWeightUpload, AModelLoadsThroughPinnedStagingAndKeepsNoHostCopy) {
  const ConvertedModel& stored = converted("llama", kUnquantized);
  const uint64_t weights = weightBytes(stored);
  const uint64_t embedding = stored.raw(stored.tensor("model.embed_tokens.weight")).size();
  const uint64_t hostBefore = tensor::Storage::liveBytes(), pinnedBefore = gpu().allocatorStats().pinnedBytes;
  const gizhw::gpu::Activity before = gpu().activity();
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(stored, {.kvCache = DType::F32, .gpu = gpu()});
  const gizhw::gpu::Activity after = gpu().activity();
  const uint64_t pinned = after.pinnedBytesToDevice - before.pinnedBytesToDevice;
  EXPECT_GE(pinned, weights - embedding);
  EXPECT_EQ(after.bytesToDevice - before.bytesToDevice, pinned);
  EXPECT_EQ(gpu().allocatorStats().pinnedBytes, pinnedBefore);
  const uint64_t hostAfter = tensor::Storage::liveBytes();
  std::printf("llama f32: %llu bytes stored, %llu up through staging, host tensors %+lld bytes\n",
              static_cast<unsigned long long>(weights), static_cast<unsigned long long>(pinned),
              static_cast<long long>(hostAfter) - static_cast<long long>(hostBefore));
  EXPECT_LT(hostAfter, hostBefore + weights / 16);
}

}  // namespace
