#pragma once
// POST /v1/images/generations and /v1/images/edits: OpenAI's requests read (prompt, model, size, n,
// response_format, and as our extensions seed, upsample (BFL's prompt upsampler first) and layout,
// FLUX 3's bounding boxes appended to the prompt by diffusion::fluxLayout; an edit's pictures from
// its multipart form).
#include <gizml/diffusion.h>
#include <gizml/image.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gizml::ai {

/// What a served image model offers to the parser.
struct ImageTarget {
  std::string name;
  int64_t sizeMultiple = 16;  // width and height must be multiples of this
  int64_t maxSide = 2048;     // and at most this
  bool upsampler = false;     // whether it rewrites prompts that ask for it
  /// An edit's size without one asked for, from its first picture; empty: the model takes no
  /// pictures (text to image only).
  std::function<std::pair<int64_t, int64_t>(const image::Image&)> editSize;
};

/// The most images a request may ask for (n).
inline constexpr int kMaxImages = 4;

/// An images request, read.
struct ImageRequest {
  size_t target = 0;  // index into the targets
  std::string prompt;
  bool upsample = false;  // the prompt rewritten by the model's upsampler first
  std::vector<diffusion::FluxElement> layout;  // appended (fluxLayout) after any upsampling
  int64_t width = 1024, height = 1024;  // absent: 1024, or the target's largest square below it
  int n = 1;          // image i from seed + i
  uint64_t seed = 0;  // given, else fresh
  std::vector<image::Image> pictures;  // an edit's, in the form's order
};

/// The most pictures an edit may give.
inline constexpr size_t kMaxEditPictures = 16;

/// Reads a body of POST /v1/images/generations. A model that is one of chatModels is refused
/// (400, naming it), an unknown one is 404. Throws ApiError.
ImageRequest parseImageRequest(const std::string& body, const std::vector<ImageTarget>& targets,
                               const std::vector<std::string>& chatModels);

/// Reads a body of POST /v1/images/edits: a multipart/form-data form (contentType: its header)
/// of the fields generations takes, as text, and the pictures, image or image[] (one or more,
/// any format image::decode reads). Without a size an edit takes the target's editSize of the
/// first picture, scaled down to the largest side when beyond it. A model that takes no
/// pictures is refused (400, naming it). Throws ApiError.
ImageRequest parseEditRequest(const std::string& contentType, const std::string& body,
                              const std::vector<ImageTarget>& targets, const std::vector<std::string>& chatModels);

}  // namespace gizml::ai
