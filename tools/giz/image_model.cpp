#include "image_model.h"

#include <gizml/error.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

// The one entry of folder/sub that `fits`; an error when there is none or more than one.
std::string onlyEntry(const fs::path& folder, const std::string& sub, const std::string& what,
                      bool (*fits)(const fs::path&)) {
  const fs::path dir = folder / sub;
  if (!fs::is_directory(dir)) throw gizml::Error(folder.string() + ": no " + sub + "/ folder (for " + what + ")");
  std::vector<fs::path> found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (fits(e.path())) found.push_back(e.path());
  if (found.size() == 1) return found[0].string();
  if (found.empty()) throw gizml::Error(dir.string() + ": none found of " + what);
  throw gizml::Error(dir.string() + ": " + std::to_string(found.size()) + " of " + what + "; name one");
}

bool safetensorsFile(const fs::path& p) { return fs::is_regular_file(p) && p.extension() == ".safetensors"; }
bool convertedFolder(const fs::path& p) { return fs::is_regular_file(p / "manifest.json"); }

void readConfig(const std::string& path, gizml::diffusion::ZImagePipelineConfig& c) {
  const nlohmann::json j = readJsonObject(path);
  for (const auto& [key, value] : j.items()) {
    const auto wrong = [&, key = key](const std::string& want) { return gizml::Error(path + ": " + key + ": expected " + want); };
    if (key == "steps") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 1000) throw wrong("a whole number in [1, 1000]");
      c.steps = value.get<int64_t>();
    } else if (key == "shift") {
      if (!value.is_number() || !(value.get<double>() > 0)) throw wrong("a number above 0");
      c.shift = value.get<double>();
    } else if (key == "rope_axes") {
      if (!value.is_array() || value.size() != 3) throw wrong("3 whole numbers (sequence, row, column)");
      c.dit.ropeAxes.clear();
      for (const nlohmann::json& v : value) {
        if (!v.is_number_integer() || v.get<int64_t>() < 2 || v.get<int64_t>() % 2) throw wrong("3 even whole numbers");
        c.dit.ropeAxes.push_back(v.get<int64_t>());
      }
    } else if (key == "low_memory") {
      if (!value.is_boolean()) throw wrong("true or false");
      c.lowMemory = value.get<bool>();
    } else {
      throw gizml::Error(path + ": '" + key + "' is not steps, shift, rope_axes or low_memory");
    }
  }
}

int64_t side(const std::string& flag, const std::string& text, const std::string& part) {
  if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 6)
    throw gizml::Error(flag + ": '" + text + "' is not WIDTHxHEIGHT (e.g. 1024x1024)");
  const int64_t v = std::stoll(part);
  if (v < 1) throw gizml::Error(flag + ": '" + text + "': a side of 0");
  return v;
}

}  // namespace

nlohmann::json readJsonObject(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw gizml::Error(path + ": cannot be read");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw gizml::Error(path + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw gizml::Error(path + ": expected a JSON object");
  return j;
}

ImageModelFiles findImageModelFiles(const std::string& folder, ImageModelFiles given) {
  if (folder.empty()) {
    if (given.dit.empty() || given.text.empty() || given.vae.empty())
      throw gizml::Error("without a MODEL folder, --dit, --text and --vae are all needed");
    return given;
  }
  const fs::path root(folder);
  if (!fs::is_directory(root)) throw gizml::Error(folder + ": no such folder");
  if (given.dit.empty()) given.dit = onlyEntry(root, "diffusion_models", "a .safetensors file (the DiT)", safetensorsFile);
  if (given.text.empty())
    given.text = onlyEntry(root, "text_encoders", "a converted folder (giz convert --z-image-text)", convertedFolder);
  if (given.vae.empty())
    given.vae = fs::is_regular_file(root / "vae" / "ae.safetensors")
                    ? (root / "vae" / "ae.safetensors").string()
                    : onlyEntry(root, "vae", "a .safetensors file (the VAE, ae.safetensors)", safetensorsFile);
  if (given.config.empty() && fs::is_regular_file(root / "zimage.json")) given.config = (root / "zimage.json").string();
  return given;
}

VideoModelFiles findVideoModelFiles(const std::string& folder, VideoModelFiles given) {
  if (folder.empty()) {
    if (given.model.empty() || given.text.empty() || given.videoVae.empty() || given.audioVae.empty())
      throw gizml::Error("without a MODEL folder, --dit, --text, --vae and --audio-vae are all needed");
    return given;
  }
  const fs::path root(folder);
  if (!fs::is_directory(root)) throw gizml::Error(folder + ": no such folder");
  if (given.model.empty())
    given.model = onlyEntry(root, "diffusion_models", "a .safetensors file (H3's checkpoint)", safetensorsFile);
  if (given.text.empty())
    given.text = onlyEntry(root, "text_encoders", "a converted folder (giz convert --h3-text)", convertedFolder);
  if (given.videoVae.empty())
    given.videoVae = onlyEntry(root, "vae", "a .safetensors file (the video decoder)", safetensorsFile);
  if (given.audioVae.empty())
    given.audioVae = onlyEntry(root, "audio_vae", "a .safetensors file (the audio decoder)", safetensorsFile);
  return given;
}

bool isKleinDit(const std::string& ditPath) { return gizml::diffusion::KleinDit::variantOf(ditPath).has_value(); }

gizml::ai::ImagePipeline loadImageModel(const ImageModelFiles& files, const KleinOptions& klein) {
  if (isKleinDit(files.dit)) {
    if (!files.config.empty())
      throw gizml::Error(files.config + ": a Z-Image config, but " + files.dit + " is a klein DiT");
    gizml::diffusion::KleinPipelineConfig config;
    if (klein.cache) config.cache = *klein.cache;
    if (klein.refresh) config.refresh = *klein.refresh;
    if (klein.steps) config.steps = *klein.steps;
    return gizml::diffusion::KleinPipeline::load(files.dit, files.vae, files.text, config);
  }
  for (const auto& [flag, given] : {std::pair{"--cache", klein.cache.has_value()},
                                    std::pair{"--refresh", klein.refresh.has_value()},
                                    std::pair{"--steps", klein.steps.has_value()}})
    if (given) throw gizml::Error(std::string(flag) + ": klein's; " + files.dit + " is a Z-Image DiT");
  gizml::diffusion::ZImagePipelineConfig config;
  if (!files.config.empty()) readConfig(files.config, config);
  return gizml::diffusion::ZImagePipeline::load(files.dit, files.text, files.vae, config);
}

std::pair<int64_t, int64_t> parseImageSize(const std::string& flag, const std::string& text) {
  const size_t x = text.find('x');
  if (x == std::string::npos) throw gizml::Error(flag + ": '" + text + "' is not WIDTHxHEIGHT (e.g. 1024x1024)");
  return {side(flag, text, text.substr(0, x)), side(flag, text, text.substr(x + 1))};
}
