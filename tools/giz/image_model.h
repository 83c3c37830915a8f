#pragma once
// An image model as giz paint and giz serve --image find it: a model folder laid out as ComfyUI's
// models/ folder (docs/serve.md, "Images"), or its parts named one by one; Z-Image Turbo or
// FLUX.2 [klein] / FLUX.3 klein, told apart by the DiT's tensor names.
#include <gizml/ai.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

/// The parts of an image model. Empty: not given (found in the folder, or the defaults).
struct ImageModelFiles {
  std::string dit;     // ComfyUI's single-file DiT (.safetensors), or diffusers' names in one file
  std::string text;    // giz convert --z-image-text's folder (klein: convertTextEncoder's)
  std::string vae;     // FLUX.1's ae.safetensors (klein: flux2-vae.safetensors)
  std::string config;  // zimage.json: {"steps", "shift", "rope_axes", "low_memory"}, each optional (Z-Image only)
};

/// Fills the parts `given` leaves empty from folder (empty: none; then dit, text and vae must
/// all be given): diffusion_models/ holding one .safetensors file, text_encoders/ holding one
/// converted folder, vae/ae.safetensors (or vae/ holding one .safetensors file) and, when there,
/// zimage.json. A part that is missing or ambiguous is a gizml::Error naming the folder.
ImageModelFiles findImageModelFiles(const std::string& folder, ImageModelFiles given);

/// Whether the DiT file is klein's: its safetensors header names the single-stream modulation
/// KleinDit::load tells its variants by (with or without ComfyUI's model.diffusion_model.);
/// else it is taken for Z-Image's. A file that is not safetensors is a gizml::Error naming it.
bool isKleinDit(const std::string& ditPath);

/// giz paint's klein flags: KleinPipelineConfig's cache, refresh and steps (nullopt: its defaults).
struct KleinOptions {
  std::optional<double> cache;
  std::optional<int64_t> refresh, steps;
};

/// The pipeline of files: klein's when isKleinDit, with `klein`'s settings; else Z-Image's (the
/// config's JSON checked, each wrong field named). A config for klein or a klein setting for
/// Z-Image is a gizml::Error.
gizml::ai::ImagePipeline loadImageModel(const ImageModelFiles& files, const KleinOptions& klein = {});

/// The parts of MiniMax H3 (giz video). Empty: not given.
struct VideoModelFiles {
  std::string model;     // H3's checkpoint (.safetensors, its own tensor names)
  std::string text;      // convertTextEncoder's folder of its Qwen3-VL, hidden state 50
  std::string videoVae;  // the video decoder's file
  std::string audioVae;  // the audio decoder's file
};

/// Fills the parts `given` leaves empty from folder (empty: none; then all four must be given):
/// diffusion_models/ holding one .safetensors file, text_encoders/ one converted folder, vae/ one
/// .safetensors file (the video decoder) and audio_vae/ one (the audio decoder). A part missing or
/// ambiguous is a gizml::Error naming the folder.
VideoModelFiles findVideoModelFiles(const std::string& folder, VideoModelFiles given);

/// A model's JSON settings file (zimage.json, h3.json): an object; else a gizml::Error naming it.
nlohmann::json readJsonObject(const std::string& path);

/// "WxH" (1024x1024) as width and height, each at least 1; else an error naming flag and text.
std::pair<int64_t, int64_t> parseImageSize(const std::string& flag, const std::string& text);
