// The prompt upsampler (diffusion.h's Upsampler): BFL's system prompts, the chat and one
// generation, as diffusers' Flux2Pipeline.upsample_prompt runs them.
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <algorithm>
#include <filesystem>

namespace gizml::diffusion {

namespace {

// BFL's system prompts for upsampling (black-forest-labs/flux2 src/flux2/system_messages.py,
// SYSTEM_MESSAGE_UPSAMPLING_T2I and _I2I, carried as they are by diffusers'
// pipelines/flux2/system_messages.py). The model was tuned on these words: they are data, kept
// verbatim; tests/reference/make_upsampler_fixtures.py checks the chat against diffusers'.
constexpr const char* kTextToImage =
    R"(You are an expert prompt engineer for FLUX.2 by Black Forest Labs. Rewrite user prompts to be more descriptive while strictly preserving their core subject and intent.

Guidelines:
1. Structure: Keep structured inputs structured (enhance within fields). Convert natural language to detailed paragraphs.
2. Details: Add concrete visual specifics - form, scale, textures, materials, lighting (quality, direction, color), shadows, spatial relationships, and environmental context.
3. Text in Images: Put ALL text in quotation marks, matching the prompt's language. Always provide explicit quoted text for objects that would contain text in reality (signs, labels, screens, etc.) - without it, the model generates gibberish.

Output only the revised prompt and nothing else.)";

constexpr const char* kEdit =
    R"(You are FLUX.2 by Black Forest Labs, an image-editing expert. You convert editing requests into one concise instruction (50-80 words, ~30 for brief requests).

Rules:
- Single instruction only, no commentary
- Use clear, analytical language (avoid "whimsical," "cascading," etc.)
- Specify what changes AND what stays the same (face, lighting, composition)
- Reference actual image elements
- Turn negatives into positives ("don't change X" → "keep X")
- Make abstractions concrete ("futuristic" → "glowing cyan neon, metallic panels")
- Keep content PG-13

Output only the final instruction in plain text and nothing else.)";

// The most pixels of the picture shown (diffusers' UPSAMPLING_MAX_IMAGE_SIZE).
constexpr int64_t kShownPixels = int64_t{768} * 768;

std::string trimmed(const std::string& s) {
  const char* space = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(space);
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

}  // namespace

Upsampler Upsampler::load(const std::string& folder, const UpsamplerConfig& config) {
  const std::filesystem::path tower = std::filesystem::path(folder) / "vision";
  return Upsampler(llm::load(folder), config,
                   std::filesystem::exists(tower / "config.json")
                       ? std::make_shared<const vision::Tower>(vision::Tower::load(tower.string()))
                       : nullptr);
}

Upsampler::Upsampler(llm::Model model, const UpsamplerConfig& config, std::shared_ptr<const vision::Tower> tower)
    : model_(std::move(model)), config_(config), tower_(std::move(tower)) {
  if (!(config.temperature >= 0) || config.limit < 1)
    throw Error("Upsampler: temperature " + std::to_string(config.temperature) + " and limit " +
                std::to_string(config.limit) + ": expected a temperature of at least 0 and a limit of at least 1");
  if (tower_ && tower_->config().outHidden != model_.hiddenSize())
    throw Error("Upsampler: the vision tower gives rows of " + std::to_string(tower_->config().outHidden) +
                " values, the language model reads " + std::to_string(model_.hiddenSize()));
}

nlohmann::ordered_json Upsampler::messages(const std::string& prompt, bool edit, bool showsPicture) {
  nlohmann::ordered_json chat = nlohmann::ordered_json::array();
  chat.push_back({{"role", "system"}, {"content", edit ? kEdit : kTextToImage}});
  if (showsPicture)
    chat.push_back({{"role", "user"}, {"content", nlohmann::ordered_json::array({{{"type", "image"}}})}});
  chat.push_back({{"role", "user"}, {"content", prompt}});
  return chat;
}

image::Image Upsampler::shownPicture(const std::vector<image::Image>& pictures) {
  if (pictures.empty()) throw Error("Upsampler::shownPicture: no pictures");
  int64_t width = 0, height = 0;
  for (const image::Image& p : pictures) {
    if (p.width < 1 || p.height < 1 || static_cast<int64_t>(p.pixels.size()) != p.width * p.height * 3)
      throw Error("Upsampler: a picture of " + std::to_string(p.width) + " x " + std::to_string(p.height) +
                  " pixels holds " + std::to_string(p.pixels.size()) + " bytes");
    width += p.width;
    height = std::max(height, p.height);
  }
  if (pictures.size() == 1) return image::fitArea(pictures[0], kShownPixels);
  image::Image side{width, height, std::vector<uint8_t>(static_cast<size_t>(width * height * 3), 255)};
  int64_t left = 0;
  for (const image::Image& p : pictures) {
    const int64_t top = (height - p.height) / 2;
    for (int64_t y = 0; y < p.height; ++y)
      std::copy_n(p.pixels.begin() + y * p.width * 3, p.width * 3, side.pixels.begin() + ((top + y) * width + left) * 3);
    left += p.width;
  }
  return image::fitArea(side, kShownPixels);
}

std::string Upsampler::caption(const std::string& prompt, const std::vector<image::Image>& pictures) const {
  return caption(prompt, pictures, config_.seed);
}

std::string Upsampler::caption(const std::string& prompt, const std::vector<image::Image>& pictures,
                               uint64_t seed) const {
  if (trimmed(prompt).empty()) throw Error("Upsampler::caption: the prompt is empty");
  llm::Request request;
  const bool shows = tower_ && !pictures.empty();
  const nlohmann::ordered_json chat = messages(prompt, !pictures.empty(), shows);
  if (shows) {
    request.pictures = {tower_->picture(shownPicture(pictures))};
    request.prompt = model_.chatTokens(chat, request.pictures).ids;
  } else {
    request.prompt = model_.chatTokens(chat).ids;
  }
  request.limit = config_.limit;
  request.sampling = config_.temperature > 0 ? llm::sample(config_.temperature, 0, 1.0, seed) : llm::greedy();
  llm::Engine engine = model_.engine(1, static_cast<int64_t>(request.prompt.size()) + request.limit);
  return trimmed(engine.generate({request}).at(0).text);
}

}  // namespace gizml::diffusion
