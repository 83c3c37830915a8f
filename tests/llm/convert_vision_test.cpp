// convert on a multimodal model (tests/reference/make_vision_fixtures.py's tiny Qwen3.5): its
// vision tower copied as stored into the destination's vision/ folder, which vision::Tower reads
// to the same rows as the source; none for a text encoder's first layers, and none left over
// from an earlier conversion when the new source has no tower.
#include <gizml/vision.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <span>

#include "model_reference.h"

namespace {

const std::string kSource = modelData("qwen3_5_vl") + "/hf";
const Bits kF32 = {.layers = 8, .head = 8, .group = 256};  // kUnquantized: every tensor in f32

nlohmann::json manifestOf(const std::string& folder) {
  return nlohmann::json::parse(std::ifstream(fs::path(folder) / kManifestName));
}

std::string fileText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The fixture's pictures: pixels_<i> and their grids.
struct Pictures {
  std::map<std::string, tensor::Tensor> tensors = loadSafetensors(modelData("qwen3_5_vl") + "/vision.safetensors");
  nlohmann::json json = nlohmann::json::parse(std::ifstream(modelData("qwen3_5_vl") + "/vision.json"));

  size_t count() const { return json["grids"].size(); }
  vision::Patches patches(size_t i) const {
    const auto& g = json["grids"][i];
    return {tensors.at("pixels_" + std::to_string(i)),
            {g[0].get<int64_t>(), g[1].get<int64_t>(), g[2].get<int64_t>()}};
  }
};

bool sameBits(const tensor::Tensor& a, const tensor::Tensor& b) {
  const std::vector<float> x = a.toFloats(), y = b.toFloats();
  return a.shape() == b.shape() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST(ConvertVision, KeepsTheTowerAsStored) {
  const std::string out = freshFolder("out");
  convert(kSource, out, kF32);
  EXPECT_EQ(manifestOf(out)["vision_tower"], "vision");
  const fs::path vision = fs::path(out) / "vision";
  EXPECT_EQ(fileText(vision / "config.json"), fileText(fs::path(kSource) / "config.json"));
  EXPECT_FALSE(fs::exists(vision / "preprocessor_config.json"));  // the fixture has none

  // Every model.visual.* tensor under its name, dtype (bf16) and bytes; nothing of the text model.
  const SafetensorsFile source(kSource + "/model.safetensors"), tower((vision / "model.safetensors").string());
  size_t towerTensors = 0;
  for (const SafetensorsTensorInfo& info : source.tensors()) {
    if (info.name.rfind("model.visual.", 0) != 0) continue;
    SCOPED_TRACE(info.name);
    ++towerTensors;
    const SafetensorsTensorInfo* copied = tower.findTensor(info.name);
    ASSERT_NE(copied, nullptr);
    EXPECT_EQ(copied->dtype, SafetensorsDType::BF16);
    EXPECT_EQ(copied->dtype, info.dtype);
    EXPECT_EQ(copied->shape, info.shape);
    const std::span<const uint8_t> a = source.tensorBytes(info), b = tower.tensorBytes(*copied);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
  EXPECT_GT(towerTensors, 0u);
  EXPECT_EQ(tower.tensors().size(), towerTensors);
}

TEST(ConvertVision, ConvertedTowerGivesTheSourcesRows) {
  const std::string out = freshFolder("out");
  convert(kSource, out, kF32);
  const vision::Tower converted = vision::Tower::load(out + "/vision"), original = vision::Tower::load(kSource);
  const Pictures pictures;
  for (size_t i = 0; i < pictures.count(); ++i) {
    SCOPED_TRACE("picture " + std::to_string(i));
    EXPECT_TRUE(sameBits(converted.encode(pictures.patches(i)), original.encode(pictures.patches(i))));
  }
}

// The converted folder alone (its language model, and its tower's rows for the pictures) gives
// transformers' logits of the fixture's prompt with both pictures.
TEST(ConvertVision, ConvertedFolderRunsThePromptWithPictures) {
  const std::string out = freshFolder("out");
  convert(kSource, out, kF32);
  const vision::Tower tower = vision::Tower::load(out + "/vision");
  const Pictures pictures;
  const std::vector<int32_t> prompt = pictures.json["prompt"].get<std::vector<int32_t>>();
  const int32_t pad = pictures.json["image_token"].get<int32_t>();
  const int64_t merge = tower.config().patches.mergeSize;

  const ConvertedModel weights = ConvertedModel::open(out);
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(weights);
  const std::unique_ptr<SequenceState> state = model->newState(128);
  Feed feed{state.get(), prompt, true};
  for (size_t i = 0, at = 0; i < pictures.count(); ++i) {
    while (prompt[at] != pad) ++at;  // each picture at its run of placeholder tokens
    const vision::Patches p = pictures.patches(i);
    feed.pictures.push_back({static_cast<int64_t>(at), tower.encode(p), p.grid.t, p.grid.h / merge, p.grid.w / merge});
    at += static_cast<size_t>(feed.pictures.back().rows.size(0));
  }
  const double error = relativeMaxError(model->forward({feed})[0].toFloats(), pictures.tensors.at("logits").toFloats());
  std::printf("converted folder with pictures: max logit error %.2e of the range\n", error);
  EXPECT_LT(error, 1e-5);  // as tests/llm/picture_rows_test.cpp's, given transformers' rows
}

TEST(ConvertVision, CopiesThePreprocessorConfig) {
  const std::string source = freshFolder("source"), out = freshFolder("out");
  for (const auto& file : fs::directory_iterator(kSource)) fs::copy_file(file.path(), fs::path(source) / file.path().filename());
  std::ofstream(fs::path(source) / "preprocessor_config.json")
      << R"({"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 4096, "max_pixels": 65536})";
  convert(source, out, kF32);
  EXPECT_EQ(fileText(fs::path(out) / "vision" / "preprocessor_config.json"),
            fileText(fs::path(source) / "preprocessor_config.json"));
  const vision::Tower tower = vision::Tower::load(out + "/vision");
  EXPECT_EQ(tower.config().patches.minPixels, 4096);
  EXPECT_EQ(tower.config().patches.maxPixels, 65536);
}

// A text encoder's first layers read no pictures.
TEST(ConvertVision, FirstLayersWriteNoTower) {
  const std::string out = freshFolder("out");
  convert(kSource, out, kF32, "", 2);
  EXPECT_FALSE(fs::exists(fs::path(out) / "vision"));
  const nlohmann::json manifest = manifestOf(out);
  EXPECT_EQ(manifest["kept_layers"], 2);
  EXPECT_EQ(manifest["vision_tower"], "");
}

TEST(ConvertVision, ATextModelRemovesAnEarlierTower) {
  const std::string out = freshFolder("out");
  convert(kSource, out, kF32);
  ASSERT_TRUE(fs::exists(fs::path(out) / "vision" / "model.safetensors"));
  convert(modelData("qwen3") + "/hf", out, kF32);
  EXPECT_FALSE(fs::exists(fs::path(out) / "vision"));
  EXPECT_EQ(manifestOf(out)["vision_tower"], "");
  EXPECT_EQ(ConvertedModel::open(out).config().architecture, Architecture::Qwen3);
}

}  // namespace
