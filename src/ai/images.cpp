// Reading OpenAI's image generation and edit requests (images.h).
#include "ai/images.h"

#include <gizml/diffusion.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "ai/multipart.h"
#include "ai/request_fields.h"

namespace gizml::ai {

using Json = nlohmann::ordered_json;

namespace {

// The most pixels an edit's picture keeps: image::decode scales a larger one down to it as it
// reads it (4096 x 4096, 48 MiB of RGB a picture; klein scales its references further, to
// 1024 x 1024 pixels).
constexpr int64_t kMaxEditPixels = int64_t{4096} * 4096;

// "WxH" within the target's limits; absent or "auto" (gpt-image-1's): `fallback`.
void readSize(const Json& body, const ImageTarget& target, std::pair<int64_t, int64_t> fallback, ImageRequest& r) {
  std::tie(r.width, r.height) = fallback;
  const Json* size = field(body, "size");
  if (!size) return;
  if (!size->is_string()) bad("size", "expected a string WIDTHxHEIGHT, got " + typeName(*size));
  const std::string text = size->get<std::string>();
  if (text == "auto") return;
  const size_t x = text.find('x');
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (x == std::string::npos || !digits(text.substr(0, x)) || !digits(text.substr(x + 1)))
    bad("size", "'" + text.substr(0, 40) + "' is not WIDTHxHEIGHT (e.g. 1024x1024)");
  r.width = std::stoll(text.substr(0, x));
  r.height = std::stoll(text.substr(x + 1));
  const std::string limits = "; '" + target.name + "' takes multiples of " + std::to_string(target.sizeMultiple) +
                             " up to " + std::to_string(target.maxSide) + " each way";
  if (r.width < target.sizeMultiple || r.height < target.sizeMultiple || r.width % target.sizeMultiple ||
      r.height % target.sizeMultiple)
    bad("size", text + " is not a multiple of " + std::to_string(target.sizeMultiple) + " each way" + limits);
  if (r.width > target.maxSide || r.height > target.maxSide) bad("size", text + " is too large" + limits);
}

// A text to image's default size: 1024 x 1024, or the largest square the target allows when that
// is smaller.
std::pair<int64_t, int64_t> squareSize(const ImageTarget& target) {
  const int64_t side = std::min<int64_t>(1024, target.maxSide / target.sizeMultiple * target.sizeMultiple);
  return {side, side};
}

// An edit's default size: the target's editSize of the first picture, its longer side scaled down
// to maxSide when beyond it (multiples of sizeMultiple, at least one).
std::pair<int64_t, int64_t> editSize(const ImageTarget& target, const image::Image& first) {
  auto [width, height] = target.editSize(first);
  const int64_t longer = std::max(width, height);
  if (longer <= target.maxSide) return {width, height};
  const auto scaled = [&](int64_t side) {
    return std::max(target.sizeMultiple, side * target.maxSide / longer / target.sizeMultiple * target.sizeMultiple);
  };
  return {scaled(width), scaled(height)};
}

// The request in body (a JSON object; an edit's form fields made one) with an edit's pictures.
ImageRequest readRequest(const Json& body, const std::vector<ImageTarget>& targets,
                         const std::vector<std::string>& chatModels, bool edit, std::vector<image::Image> pictures) {
  ImageRequest r;
  if (const Json* model = field(body, "model")) {
    if (!model->is_string()) bad("model", "expected a string, got " + typeName(*model));
    const std::string name = model->get<std::string>();
    const auto it = std::find_if(targets.begin(), targets.end(), [&](const ImageTarget& t) { return t.name == name; });
    if (std::find(chatModels.begin(), chatModels.end(), name) != chatModels.end())
      bad("model", "'" + name + "' is a language model: it answers POST /v1/chat/completions, not images",
          "model_not_supported");
    if (it == targets.end()) {
      std::string known;
      for (const ImageTarget& t : targets) known += (known.empty() ? "" : ", ") + t.name;
      throw ApiError(404, "The image model '" + name + "' does not exist (served: " + known + ")", "model",
                     "model_not_found");
    }
    r.target = static_cast<size_t>(it - targets.begin());
  }
  const Json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "is required");
  if (!prompt->is_string()) bad("prompt", "expected a string, got " + typeName(*prompt));
  r.prompt = prompt->get<std::string>();
  if (r.prompt.empty()) bad("prompt", "is empty");
  if (const Json* layout = field(body, "layout")) {
    // FLUX 3's bounding boxes: a list of elements, or its JSON text (an edit's form field).
    if (!layout->is_array() && !layout->is_string())
      bad("layout", "expected a list of elements (or its JSON text), got " + typeName(*layout));
    try {
      r.layout = layout->is_string() ? diffusion::readFluxElements(layout->get<std::string>())
                                     : diffusion::fluxElements(*layout);
      diffusion::fluxLayout(r.prompt, r.layout);  // its checks, before any painting
    } catch (const Error& e) {
      bad("layout", e.what());
    }
  }
  const ImageTarget& target = targets[r.target];
  if (auto upsample = boolean(body, "upsample"); upsample && *upsample) {
    if (!target.upsampler)
      bad("upsample", "'" + target.name + "' has no prompt upsampler (giz serve --upsampler FOLDER)");
    r.upsample = true;
  }
  if (edit) {
    if (!target.editSize)
      bad("model", "'" + target.name + "' paints from text alone: it takes no pictures (POST /v1/images/generations)",
          "model_not_supported");
    if (pictures.empty()) bad("image", "is required: one picture or more (image, or image[] for several)");
    for (size_t i = 0; i < pictures.size(); ++i)
      if (pictures[i].width < target.sizeMultiple || pictures[i].height < target.sizeMultiple)
        bad("image", "picture " + std::to_string(i + 1) + " (" + std::to_string(pictures[i].width) + " x " +
                         std::to_string(pictures[i].height) + ") is smaller than " +
                         std::to_string(target.sizeMultiple) + " a side");
    r.pictures = std::move(pictures);
  }
  readSize(body, target, edit ? editSize(target, r.pictures[0]) : squareSize(target), r);
  if (auto v = integer(body, "n", 1, kMaxImages)) r.n = static_cast<int>(*v);
  const auto seed = integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  r.seed = seed ? static_cast<uint64_t>(*seed) : freshSeed();
  if (const Json* format = field(body, "response_format")) {
    if (!format->is_string()) bad("response_format", "expected a string, got " + typeName(*format));
    if (*format == "url") bad("response_format", "'url' is not served: only b64_json (the PNG in the answer)");
    if (*format != "b64_json") bad("response_format", "'" + format->get<std::string>() + "' is not b64_json");
  }
  if (const Json* format = field(body, "output_format"); format && *format != "png")
    bad("output_format", "only png is served");
  if (auto stream = boolean(body, "stream"); stream && *stream) bad("stream", "images are not streamed");
  return r;
}

// A text field of an edit's form as the JSON value generations would hold: n and seed as
// numbers when they read as whole numbers (else the string, which the reader refuses, named),
// stream and upsample as booleans when true or false, the rest as strings.
Json formValue(const std::string& name, const std::string& text) {
  if (name == "n" || name == "seed") {
    const bool whole = !text.empty() && text.size() <= 20 &&
                       text.find_first_not_of("0123456789", text[0] == '-' ? 1 : 0) == std::string::npos &&
                       text != "-";
    if (whole) {
      try {
        return std::stoll(text);
      } catch (const std::out_of_range&) {
      }
    }
  }
  if ((name == "stream" || name == "upsample") && (text == "true" || text == "false")) return text == "true";
  return text;
}

}  // namespace

ImageRequest parseImageRequest(const std::string& text, const std::vector<ImageTarget>& targets,
                               const std::vector<std::string>& chatModels) {
  return readRequest(parseBody(text), targets, chatModels, false, {});
}

ImageRequest parseEditRequest(const std::string& contentType, const std::string& text,
                              const std::vector<ImageTarget>& targets, const std::vector<std::string>& chatModels) {
  std::vector<multipart::Part> parts;
  try {
    parts = multipart::parse(text, multipart::boundary(contentType));
  } catch (const multipart::MultipartError& e) {
    throw ApiError(400, std::string("the multipart/form-data body: ") + e.what());
  }
  Json body = Json::object();
  std::vector<image::Image> pictures;
  for (const multipart::Part& part : parts) {
    if (part.name == "image" || part.name == "image[]") {
      if (pictures.size() == kMaxEditPictures)
        bad(part.name, "more than " + std::to_string(kMaxEditPictures) + " pictures");
      const std::string which = "picture " + std::to_string(pictures.size() + 1) +
                                (part.filename ? " ('" + part.filename->substr(0, 60) + "')" : "");
      try {
        pictures.push_back(image::decode({reinterpret_cast<const uint8_t*>(part.body.data()), part.body.size()},
                                         kMaxEditPixels));
      } catch (const Error& e) {
        bad(part.name, which + " is not a picture gizml reads (PNG, JPEG, ...): " + e.what());
      }
    } else if (part.name == "mask") {
      bad("mask", "masks are not served: the model edits the whole picture as the prompt says");
    } else if (part.filename) {
      bad(part.name, "expected a text field, got a file");
    } else {
      if (body.contains(part.name)) bad(part.name, "given twice");
      body[part.name] = formValue(part.name, part.body);
    }
  }
  return readRequest(body, targets, chatModels, true, std::move(pictures));
}

}  // namespace gizml::ai
