// Chat messages' text and pictures (message_content.h).
#include "ai/message_content.h"

#include <gizml/image.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "ai/base64.h"
#include "ai/request_fields.h"

namespace gizml::ai {
namespace {

using Json = nlohmann::ordered_json;

bool startsWithNoCase(const std::string& text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), text.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
}

// The bytes of a data URL (RFC 2397) in base64: data:[MEDIA TYPE][;PARAMETERS];base64,DATA. The
// media type is not checked: the bytes tell PNG from JPEG (and from anything else) when decoded.
std::vector<uint8_t> dataUrlBytes(const std::string& url, const std::string& param) {
  if (startsWithNoCase(url, "http://") || startsWithNoCase(url, "https://"))
    bad(param, "the server fetches no URLs: send the picture itself as a data URL (data:image/png;base64,...)");
  if (!startsWithNoCase(url, "data:"))
    bad(param, "expected a data URL (data:image/png;base64,...), got '" + url.substr(0, 40) + "'");
  const size_t comma = url.find(',');
  if (comma == std::string::npos) bad(param, "the data URL has no ',' before its data");
  const std::string header = url.substr(0, comma);
  if (header.size() < 12 || !startsWithNoCase(header.substr(header.size() - 7), ";base64"))
    bad(param, "the data URL is not base64 ('" + header.substr(0, 60) + "' does not end in ;base64)");
  std::optional<std::vector<uint8_t>> bytes = fromBase64(std::string_view(url).substr(comma + 1));
  if (!bytes)
    bad(param, "the data is not base64 (A-Z, a-z, 0-9, + and /, padded with = to a multiple of 4 characters, "
               "no spaces or line breaks)");
  return std::move(*bytes);
}

// An image_url part's picture file: {"type": "image_url", "image_url": {"url", "detail"}}.
PictureFile pictureFile(const Json& part, const std::string& at) {
  const auto imageUrl = part.find("image_url");
  if (imageUrl == part.end() || !imageUrl->is_object())
    bad(at + ".image_url", "expected an object {\"url\": \"data:image/png;base64,...\"}");
  const auto url = imageUrl->find("url");
  if (url == imageUrl->end() || !url->is_string()) bad(at + ".image_url.url", "expected a data URL string");
  // The picture is shown at the tower's own size within the pixel budget, whatever detail says.
  if (const auto detail = imageUrl->find("detail"); detail != imageUrl->end() && !detail->is_null()) {
    if (!detail->is_string() || (*detail != "auto" && *detail != "low" && *detail != "high"))
      bad(at + ".image_url.detail", "expected auto, low or high");
  }
  return {dataUrlBytes(url->get<std::string>(), at + ".image_url.url"), at};
}

// A content part's type: a bare string is a text part.
std::string partType(const Json& part, const std::string& at) {
  if (part.is_string()) return "text";
  if (!part.is_object()) bad(at, "expected a content part object, got " + typeName(part));
  const auto type = part.find("type");
  if (type == part.end() || !type->is_string()) bad(at + ".type", "is missing");
  return type->get<std::string>();
}

// A text part's text: {"type": "text", "text"}, or a bare string.
std::string partText(const Json& part, const std::string& at) {
  if (part.is_string()) return part.get<std::string>();
  const auto text = part.find("text");
  if (text == part.end() || !text->is_string()) bad(at + ".text", "expected a string");
  return text->get<std::string>();
}

}  // namespace

Json messageContent(const Json& content, const std::string& param, bool user, std::vector<PictureFile>& pictures) {
  if (content.is_string()) return content;
  if (!content.is_array()) bad(param, "expected a string or a list of content parts, got " + typeName(content));
  Json items = Json::array();
  bool showsPictures = false;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const std::string at = param + "[" + std::to_string(j) + "]";
    const std::string type = partType(part, at);
    if (type == "text") {
      items.push_back({{"type", "text"}, {"text", partText(part, at)}});
      continue;
    }
    if (type != "image_url") bad(at + ".type", "'" + type + "' parts are not supported (text and image_url)");
    if (!user) bad(at, "pictures are read in user messages only");
    if (pictures.size() == kMaxPictures)
      bad(at, "more than " + std::to_string(kMaxPictures) + " pictures in one request (the server's limit)");
    pictures.push_back(pictureFile(part, at));
    items.push_back({{"type", "image"}});
    showsPictures = true;
  }
  if (showsPictures) return items;
  std::string text;  // text parts alone: one string, as every chat template reads it
  for (const Json& item : items) {
    if (!text.empty()) text += '\n';
    text += item["text"].get<std::string>();
  }
  return text;
}

std::vector<llm::Picture> towerPictures(const std::vector<PictureFile>& files, const vision::Tower& tower,
                                        int64_t maxPixels) {
  // One request's pictures at a time: a picture is decoded whole before it is scaled down (up to
  // image::kMaxPixels, 768 MiB of RGB), so requests decoding at once would add those up; the
  // tower runs on the shared thread pool either way.
  static std::mutex oneAtATime;
  const std::lock_guard lock(oneAtATime);
  std::vector<llm::Picture> out;
  for (const PictureFile& file : files) {
    const std::string param = file.param + ".image_url.url";
    image::Image picture;
    try {
      picture = image::decode(file.bytes, maxPixels);
    } catch (const Error& e) {
      bad(param, std::string("the data is not a picture gizml reads (PNG or JPEG): ") + e.what());
    }
    try {
      out.push_back(tower.picture(picture));
    } catch (const Error& e) {
      bad(param, std::string("the picture cannot be shown to the model: ") + e.what());
    }
  }
  return out;
}

}  // namespace gizml::ai
