// Reading OpenAI's image generation requests (images.h).
#include "ai/images.h"

#include <algorithm>
#include <limits>

#include "ai/request_fields.h"

namespace gizml::ai {

using Json = nlohmann::ordered_json;

namespace {

// "WxH" within the target's limits; "auto" (gpt-image-1's) is the default size: 1024 x 1024, or
// the largest square the target allows when that is smaller.
void readSize(const Json& body, const ImageTarget& target, ImageRequest& r) {
  r.width = r.height = std::min<int64_t>(1024, target.maxSide / target.sizeMultiple * target.sizeMultiple);
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

}  // namespace

ImageRequest parseImageRequest(const std::string& text, const std::vector<ImageTarget>& targets,
                               const std::vector<std::string>& chatModels) {
  const Json body = parseBody(text);
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
  readSize(body, targets[r.target], r);
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

std::string base64(std::span<const uint8_t> bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t left = bytes.size() - i;
    const uint32_t v = uint32_t{bytes[i]} << 16 | (left > 1 ? uint32_t{bytes[i + 1]} << 8 : 0) | (left > 2 ? bytes[i + 2] : 0);
    out += digits[v >> 18 & 63];
    out += digits[v >> 12 & 63];
    out += left > 1 ? digits[v >> 6 & 63] : '=';
    out += left > 2 ? digits[v & 63] : '=';
  }
  return out;
}

}  // namespace gizml::ai
