// vision::Tower against transformers' Qwen3_5VisionModel and Qwen3VLVisionModel (with deepstack
// blocks) on tiny random models (tests/reference/make_vision_fixtures.py): the rows of two
// pictures of different grids, and their deepstack rows.
#include <gizml/error.h>
#include <gizml/safetensors.h>
#include <gizml/vision.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include "common/test_paths.h"

namespace gizml::vision {
namespace {

const std::string kModels = test_paths::testData() + "/models/";
const std::string kModel = kModels + "qwen3_5_vl";

struct Reference {
  explicit Reference(std::string folder = kModel) : folder(std::move(folder)) {}
  std::string folder;
  std::map<std::string, tensor::Tensor> tensors = llm::loadSafetensors(folder + "/vision.safetensors");
  nlohmann::json json = nlohmann::json::parse(std::ifstream(folder + "/vision.json"));

  Patches picture(size_t i) const {
    const auto& g = json["grids"][i];
    return {tensors.at("pixels_" + std::to_string(i)), {g[0].get<int64_t>(), g[1].get<int64_t>(), g[2].get<int64_t>()}};
  }
};

// The largest |a - b| over b's largest |b|.
double relativeError(const tensor::Tensor& a, const tensor::Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<float> x = a.toFloats(), y = b.toFloats();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    diff = std::max(diff, std::fabs(double(x[i]) - double(y[i])));
    scale = std::max(scale, std::fabs(double(y[i])));
  }
  return diff / scale;
}

TEST(VisionTower, ReadsTheConfig) {
  const Tower tower = Tower::load(kModel + "/hf");
  const TowerConfig& c = tower.config();
  EXPECT_EQ(c.depth, 2);
  EXPECT_EQ(c.hidden, 32);
  EXPECT_EQ(c.heads, 2);
  EXPECT_EQ(c.outHidden, 64);
  EXPECT_EQ(c.positions, 16);
  EXPECT_EQ(c.patches.patchSize, 16);
  EXPECT_EQ(c.patches.mergeSize, 2);
  EXPECT_TRUE(c.tanhGelu);
}

class VisionTowers : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionTowers, RowsOfEachPictureAreTransformers) {
  const Reference ref(kModels + GetParam());
  const Tower tower = Tower::load(ref.folder + "/hf");
  for (size_t i = 0; i < ref.json["grids"].size(); ++i) {
    SCOPED_TRACE("picture " + std::to_string(i));
    const Patches p = ref.picture(i);
    const llm::Picture picture = tower.picture(p);
    ASSERT_EQ(picture.rows.shape(), (tensor::Shape{p.grid.patches() / 4, 64}));
    EXPECT_EQ((std::vector<int64_t>{picture.t, picture.h, picture.w}),
              (std::vector<int64_t>{p.grid.t, p.grid.h / 2, p.grid.w / 2}));
    // F32 throughout on both sides; the sums run in other orders.
    EXPECT_LT(relativeError(picture.rows, ref.tensors.at("rows_" + std::to_string(i))), 1e-5);
    EXPECT_EQ(picture.deepstack.size(), tower.config().deepstack.size());
    for (size_t l = 0; l < picture.deepstack.size(); ++l)
      EXPECT_LT(relativeError(picture.deepstack[l],
                              ref.tensors.at("deepstack_" + std::to_string(i) + "_" + std::to_string(l))),
                1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Qwen, VisionTowers, ::testing::Values("qwen3_5_vl", "qwen3_vl_deepstack"));

TEST(VisionTower, ReadsQwen3VLsDeepstackBlocks) {
  EXPECT_EQ(Tower::load(kModels + "qwen3_vl_deepstack/hf").config().deepstack, (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(Tower::load(kModel + "/hf").config().deepstack.empty());
}

TEST(VisionTower, BadPatchesAreErrors) {
  const Reference ref;
  const Tower tower = Tower::load(kModel + "/hf");
  Patches p = ref.picture(0);
  p.grid.h = 5;  // not a multiple of the merge size
  try {
    tower.encode(p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiples of 2"), std::string::npos) << e.what();
  }
  p = ref.picture(0);
  p.grid.w = 6;  // more patches than the pixels hold
  try {
    tower.encode(p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected [36, 1536]"), std::string::npos) << e.what();
  }
}

TEST(VisionTower, AModelWithoutATowerIsAnError) {
  try {
    Tower::load(test_paths::testData() + "/models/qwen3_5/hf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vision_config is missing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gizml::vision
