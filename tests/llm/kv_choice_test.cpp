// The engine's automatic KV format (llm/engine/kv_choice.h) on given sizes: 8 bits, else 4, else
// keys in 4 and values in 2, the first whose whole pool fits the memory available; and an engine
// left to choose on a machine with room picks 8 bits.
#include "llm/engine/kv_choice.h"

#include <gizml/llm.h>
#include <gtest/gtest.h>

#include "llm/language_model.h"
#include "llm/model_reference.h"

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Pages of 100, 60 and 40 MiB in 8, 4 and 4/2 bits.
int64_t pageBytes(const KvFormat& f) {
  return f == KvFormat::parse("8") ? 100 * kMiB : f == KvFormat::parse("4") ? 60 * kMiB : 40 * kMiB;
}

TEST(KvChoice, TheFirstOf8And4And4Over2ThatFits) {
  EXPECT_EQ(chooseKvFormat(10, 1000 * kMiB, pageBytes).text(), "8");
  EXPECT_EQ(chooseKvFormat(10, 999 * kMiB, pageBytes).text(), "4");
  EXPECT_EQ(chooseKvFormat(10, 450 * kMiB, pageBytes).text(), "4/2");
  EXPECT_EQ(chooseKvFormat(10, 0, pageBytes).text(), "8");  // memory not known
  expectError([] { chooseKvFormat(10, 300 * kMiB, pageBytes); },
              {"its KV pool of 10 pages needs 400 MiB even with keys in 4 bits and values in 2",
               "300 MiB are available where its pages go"});
  // Heads too long to code: 16 bits.
  const auto uncoded = [](const KvFormat&) -> int64_t { throw Error("too long to code"); };
  EXPECT_EQ(chooseKvFormat(10, 300 * kMiB, uncoded).text(), "16");
}

TEST(KvChoice, AnEngineLeftToChooseKeeps8BitsWhereTheyFit) {
  const std::shared_ptr<LanguageModel> model = buildLanguageModel(converted("llama", 8), {.kvCache = std::nullopt});
  const Engine engine(model, nullptr, {}, 2, 300);
  EXPECT_EQ(engine.kvFormat().text(), "8");
  EXPECT_EQ(engine.poolBytes(), model->newPool(4, KvFormat::parse("8"))->bytes());
  // llm::load leaves it to the engine unless told (the converted llama with Qwen3's tokenizer).
  const std::string folder = loadableLlama("load");
  EXPECT_EQ(load(folder).engine(1, 64).kvFormat().text(), "8");
  EXPECT_EQ(load(folder, {.kv = KvFormat::parse("4/2")}).engine(1, 64).kvFormat().text(), "4/2");
  EXPECT_EQ(load(folder, {.kv = KvFormat(DType::F32)}).engine(1, 64).kvFormat().text(), "f32");
}

}  // namespace
