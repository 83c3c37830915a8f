// SmolLM2-135M-Instruct loaded with only its first layers (LoadOptions::layers): the hidden states
// Engine::hidden gives against transformers' on the same GGUF (tests/data/real_models/
// smollm2_hidden.*, tests/reference/make_hidden_fixtures.py), and the memory such a model takes.
#include <gizml/llm.h>
#include <gtest/gtest.h>
#include <malloc.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "llm/formats/safetensors.h"
#include "real_models.h"
#include "common/test_paths.h"

// Measured, relative RMS error of the hidden states: 3.5e-4 after layer 1, 6.9e-4 after 29 of 30:
// F16's rounding of the GGUF's Q4_1 values (<= 2^-11 each) against transformers' float32.
namespace {

const Case kSmolLM2At16 = {"smollm2", Bits{.layers = 16, .head = 16}};

// ||got - want|| / ||want||.
double relativeRmsError(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

// The process's resident memory in bytes (Linux), or -1.
int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = -1;
  if (!(statm >> size >> resident)) return -1;
  return resident * 4096;
}

}  // namespace

TEST(RealModelHidden, SmolLM2FirstLayersGiveTransformersHiddenStates) {
  const std::string folder = convertedFolder(kSmolLM2At16);
  if (folder.empty()) GTEST_SKIP() << notInstalled(kSmolLM2At16);
  const std::string data = test_paths::testData() + "/real_models/smollm2_hidden";
  const nlohmann::json ref = nlohmann::json::parse(std::ifstream(data + ".json"));
  const std::vector<TokenId> ids = ref["ids"];
  const gizml::llm::SafetensorsFile states(data + ".safetensors");
  for (int64_t layers : ref["layers"].get<std::vector<int64_t>>()) {
    const Model model = load(folder, {.layers = layers});
    EXPECT_EQ(model.tokenizer().encode(ref["text"].get<std::string>(), false), ids);
    const gizml::tensor::Tensor got = model.engine(1, static_cast<int64_t>(ids.size())).hidden(ids);
    const std::vector<float> want = states.load("hidden_" + std::to_string(layers)).toFloats();
    ASSERT_EQ(got.shape(), (gizml::tensor::Shape{static_cast<int64_t>(ids.size()), 576}));
    const double error = relativeRmsError(got.toFloats(), want);
    std::printf("smollm2 at 16 bits, first %lld of 30 layers: relative RMS error %.2e\n",
                static_cast<long long>(layers), error);
    EXPECT_LT(error, 2e-3);
  }
}

// Only the first layers' weights are read: the memory a load takes falls in proportion.
// Measured: 12.2 MiB with 1 layer (its repacked 16-bit weights are 6.8 MiB of it), 257.4 MiB with all 30 (and the tied output layer's 54 MiB).
TEST(RealModelHidden, SmolLM2FirstLayerTakesAFractionOfTheMemory) {
  const std::string folder = convertedFolder(kSmolLM2At16);
  if (folder.empty()) GTEST_SKIP() << notInstalled(kSmolLM2At16);
  if (residentBytes() < 0) GTEST_SKIP() << "no /proc/self/statm";
  // glibc raises its mmap threshold after a large block is freed, and then serves the next
  // load's weights from the heap memory the last one left: a fixed threshold maps each large
  // block afresh, so that what a load adds shows in the resident memory.
  mallopt(M_MMAP_THRESHOLD, 64 << 10);
  auto grows = [&](int64_t layers) {
    const int64_t before = residentBytes();
    const Model model = load(folder, {.layers = layers});
    return residentBytes() - before;
  };
  grows(1);  // the first load's lasting allocations (the tokenizer's tables) out of the way
  const int64_t one = grows(1), all = grows(0);
  std::printf("smollm2 at 16 bits: a load takes %.1f MiB with 1 layer, %.1f MiB with all 30\n", one / 1048576.0,
              all / 1048576.0);
  EXPECT_LT(one * 8, all);
}
