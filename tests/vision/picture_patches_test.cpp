// vision::smartResize and vision::patches against transformers' Qwen2VLImageProcessorPil
// (tests/reference/make_vision_patch_fixtures.py, tests/data/vision/).
#include <gizml/error.h>
#include <gizml/image.h>
#include <gizml/safetensors.h>
#include <gizml/vision.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/file_bytes.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::vision;

namespace {

std::string dataPath(const std::string& name) { return test_paths::testData() + "/vision/" + name; }

nlohmann::json cases() {
  std::ifstream in(dataPath("cases.json"));
  return nlohmann::json::parse(in);
}

// A preprocessor_config.json's fields (as cases.json names them) as a PatchConfig.
PatchConfig configOf(const nlohmann::json& fields) {
  PatchConfig config;
  config.patchSize = fields.at("patch_size");
  config.temporalPatchSize = fields.at("temporal_patch_size");
  config.mergeSize = fields.at("merge_size");
  config.minPixels = fields.at("min_pixels");
  config.maxPixels = fields.at("max_pixels");
  for (size_t c = 0; c < 3; ++c) {
    config.mean[c] = float(fields.at("image_mean").at(c).get<double>());
    config.std[c] = float(fields.at("image_std").at(c).get<double>());
  }
  return config;
}

// The message of the gizml::Error that body throws ("" when it throws none).
template <class Body>
std::string errorOf(Body body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Expects body to throw a gizml::Error whose message holds part.
template <class Body>
void expectErrorNaming(Body body, const std::string& part) {
  const std::string message = errorOf(body);
  EXPECT_NE(message.find(part), std::string::npos) << "\"" << message << "\" does not name \"" << part << "\"";
}

image::Image pictureOf(int64_t width, int64_t height) {
  return {width, height, std::vector<uint8_t>(size_t(width * height * 3), 128)};
}

}  // namespace

// pixel_values and image_grid_thw as transformers gives them: the resized bytes are Pillow's
// (image::resize, Filter::Bicubic), and rescale and normalize are computed in transformers' f64
// and f32 steps, so the values agree to float rounding (asserted within 1e-6; they are equal).
TEST(PicturePatches, MatchTransformers) {
  const nlohmann::json all = cases();
  int checked = 0;
  for (const nlohmann::json& c : all.at("patches")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const PatchConfig config = configOf(c.at("config"));
    const Patches got = patches(image::decode(readFileBytes(dataPath(c.at("picture")))), config);
    const auto expected = llm::loadSafetensors(dataPath(name + ".safetensors"));

    const int64_t* thw = expected.at("image_grid_thw").data<int64_t>();
    EXPECT_EQ(got.grid.t, thw[0]);
    EXPECT_EQ(got.grid.h, thw[1]);
    EXPECT_EQ(got.grid.w, thw[2]);
    const int64_t rowLength = 3 * config.temporalPatchSize * config.patchSize * config.patchSize;
    ASSERT_EQ(got.pixels.shape(), (tensor::Shape{got.grid.patches(), rowLength}));

    // All rows, or those the fixture kept.
    tensor::Tensor gotRows = got.pixels;
    if (expected.count("rows")) gotRows = got.pixels.indexSelect(0, expected.at("rows")).contiguous();
    const tensor::Tensor& want = expected.at("pixel_values");
    ASSERT_EQ(gotRows.shape(), want.shape());
    const float* a = gotRows.data<float>();
    const float* b = want.data<float>();
    float worst = 0.0f;
    for (int64_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    EXPECT_LE(worst, 1e-6f);
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

// The defaults are Qwen3.5's preprocessor_config.json.
TEST(PicturePatches, DefaultsAreQwen35s) {
  const nlohmann::json all = cases();
  const auto qwen35 = std::find_if(all.at("patches").begin(), all.at("patches").end(),
                                   [](const nlohmann::json& c) { return c.at("name") == "qwen35_40x30"; });
  ASSERT_NE(qwen35, all.at("patches").end());
  const PatchConfig defaults;
  const PatchConfig fromFile = configOf(qwen35->at("config"));
  EXPECT_EQ(defaults.patchSize, fromFile.patchSize);
  EXPECT_EQ(defaults.temporalPatchSize, fromFile.temporalPatchSize);
  EXPECT_EQ(defaults.mergeSize, fromFile.mergeSize);
  EXPECT_EQ(defaults.minPixels, fromFile.minPixels);
  EXPECT_EQ(defaults.maxPixels, fromFile.maxPixels);
  EXPECT_EQ(defaults.mean, fromFile.mean);
  EXPECT_EQ(defaults.std, fromFile.std);
}

// transformers' smart_resize: rounding halves to even, scaled into [min, max] pixels, a side never
// below the factor, and an aspect ratio above 200 refused, the ratio printed as Python prints it.
TEST(PicturePatches, SmartResizeMatchesTransformers) {
  const nlohmann::json all = cases();
  int sizes = 0, errors = 0;
  for (const nlohmann::json& c : all.at("smart_resize")) {
    SCOPED_TRACE(c.dump());
    auto resize = [&] {
      return smartResize(c.at("height"), c.at("width"), c.at("factor"), c.at("min_pixels"), c.at("max_pixels"));
    };
    if (c.contains("error")) {
      const std::string python = c.at("error");  // "absolute aspect ratio must be smaller than 200, got 201.5"
      expectErrorNaming(resize, "have aspect ratio " + python.substr(python.rfind("got ") + 4) + ", above 200");
      ++errors;
      continue;
    }
    const auto [height, width] = resize();
    EXPECT_EQ(height, c.at("expected").at(0).get<int64_t>());
    EXPECT_EQ(width, c.at("expected").at(1).get<int64_t>());
    ++sizes;
  }
  EXPECT_EQ(sizes, 12);
  EXPECT_EQ(errors, 3);
}

// Bad pictures and configs are a gizml::Error naming what is wrong.
TEST(PicturePatches, RefusesBadInput) {
  const PatchConfig qwen35;
  EXPECT_THROW(patches(image::Image{}, qwen35), Error);
  expectErrorNaming([&] { patches(image::Image{}, qwen35); }, "the picture is 0 x 0 pixels");
  image::Image shortOfBytes = pictureOf(4, 4);
  shortOfBytes.pixels.pop_back();
  expectErrorNaming([&] { patches(shortOfBytes, qwen35); }, "4 x 4 pixels with 47 bytes of RGB");
  EXPECT_THROW(patches(pictureOf(250, 1), qwen35), Error);
  expectErrorNaming([&] { patches(pictureOf(250, 1), qwen35); },
                    "height 1 and width 250 have aspect ratio 250.0, above 200");
  expectErrorNaming([] { smartResize(0, 5, 32, 1, 100); }, "height 0 and width 5: each side must be 1 to");
  expectErrorNaming([] { smartResize(5, 5, 0, 1, 100); }, "factor 0");

  const image::Image picture = pictureOf(40, 30);
  auto expectConfigError = [&](auto change, const std::string& part) {
    PatchConfig config;
    change(config);
    expectErrorNaming([&] { patches(picture, config); }, part);
  };
  expectConfigError([](PatchConfig& c) { c.patchSize = 0; }, "patchSize is 0");
  expectConfigError([](PatchConfig& c) { c.mergeSize = -2; }, "mergeSize is -2");
  expectConfigError([](PatchConfig& c) { c.temporalPatchSize = 0; }, "temporalPatchSize is 0");
  expectConfigError([](PatchConfig& c) { c.minPixels = 0; }, "minPixels and maxPixels must be positive, not 0");
  expectConfigError([](PatchConfig& c) { c.std[1] = 0.0f; }, "channel 1's mean 0.5 and std 0.0 must be finite");
  expectConfigError([](PatchConfig& c) { c.mean[2] = NAN; }, "channel 2's mean nan");
}
