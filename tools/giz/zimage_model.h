#pragma once
// Z-Image Turbo as giz paint and giz serve --image find it: a model folder laid out as ComfyUI's
// models/ folder (docs/serve.md, "Images"), or its three parts named one by one.
#include <gizml/diffusion.h>

#include <string>

/// The parts of a Z-Image model. Empty: not given (found in the folder, or the defaults).
struct ZImageFiles {
  std::string dit;     // ComfyUI's single-file DiT (.safetensors)
  std::string text;    // giz convert --z-image-text's folder
  std::string vae;     // FLUX.1's ae.safetensors
  std::string config;  // zimage.json: {"steps", "shift", "rope_axes", "low_memory"}, each optional
};

/// Fills the parts `given` leaves empty from folder (empty: none; then dit, text and vae must
/// all be given): diffusion_models/ holding one .safetensors file, text_encoders/ holding one
/// converted folder, vae/ae.safetensors (or vae/ holding one .safetensors file) and, when there,
/// zimage.json. A part that is missing or ambiguous is a gizml::Error naming the folder.
ZImageFiles findZImageFiles(const std::string& folder, ZImageFiles given);

/// The pipeline of files (the config's JSON checked, each wrong field named).
gizml::diffusion::ZImagePipeline loadZImage(const ZImageFiles& files);

/// "WxH" (1024x1024) as width and height, each at least 1; else an error naming flag and text.
std::pair<int64_t, int64_t> parseImageSize(const std::string& flag, const std::string& text);
