#pragma once
// What the diffusion model tests share: the fixtures under tests/data/diffusion/, a fixture's
// weights edited into a temporary file, a load that must fail naming the file and tensor, and
// pictures compared byte by byte.
#include <gizml/error.h>
#include <gizml/image.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/temporary.h"
#include "common/test_paths.h"

namespace gizml::test {

using Weights = std::map<std::string, T::Tensor>;

inline std::string diffusionData(const std::string& name) {
  return test_paths::testData() + "/diffusion/" + name;
}

/// giz paint's MODEL folder for the command-line tests of tests/CMakeLists.txt at $env: emptied,
/// with model/diffusion_models and model/vae made; nullopt where the variable is unset.
inline std::optional<std::filesystem::path> freshModelFolder(const char* env) {
  const char* root = std::getenv(env);
  if (!root) return std::nullopt;
  const std::filesystem::path folder(root);
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder / "model" / "diffusion_models");
  std::filesystem::create_directories(folder / "model" / "vae");
  return folder;
}

/// The pixels of got whose every channel is within 1 of want's (RGB bytes of the same size).
inline int64_t pixelsWithinOne(const image::Image& got, const std::vector<uint8_t>& want) {
  EXPECT_EQ(got.pixels.size(), want.size());
  int64_t close = 0;
  for (size_t i = 0; i + 2 < std::min(got.pixels.size(), want.size()); i += 3) {
    bool ok = true;
    for (size_t c = 0; c < 3; ++c) ok = ok && std::abs(int(got.pixels[i + c]) - int(want[i + c])) <= 1;
    close += ok;
  }
  return close;
}

inline double maxAbsDiff(const T::Tensor& a, const T::Tensor& b) {
  const std::vector<float> x = a.toFloats(), y = b.toFloats();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) m = std::max(m, std::fabs(double(x[i]) - double(y[i])));
  return m;
}

/// The fixture `file`'s weights changed by `edit`, saved as a temporary file named by `tag`.
inline std::string editedWeights(const std::string& file, const std::string& tag,
                                 const std::function<void(Weights&)>& edit) {
  Weights w = llm::loadSafetensors(diffusionData(file));
  edit(w);
  const std::string path = temporary(tag, ".safetensors");
  llm::saveSafetensors(path, w);
  return path;
}

/// load(path) throws a gizml::Error naming the file and `tensorName`; the file is removed.
inline void expectLoadError(const std::function<void(const std::string&)>& load, const std::string& path,
                            const std::string& tensorName) {
  try {
    load(path);
    ADD_FAILURE() << "no error for " << tensorName;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(tensorName), std::string::npos) << what;
  }
  std::filesystem::remove(path);
}

}  // namespace gizml::test
