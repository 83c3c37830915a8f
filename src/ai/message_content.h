#pragma once
// A chat message's content as the chat template reads it: its text, or its text and pictures
// (OpenAI's image_url parts, data: URLs only), and those pictures as a vision tower's rows.
#include <gizml/llm.h>
#include <gizml/vision.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gizml::ai {

/// The most pictures one chat request may show.
inline constexpr size_t kMaxPictures = 16;

/// A picture a message shows: its file's bytes, read from its data URL, and the part's
/// parameter path (messages[i].content[j]), which errors about it name.
struct PictureFile {
  std::vector<uint8_t> bytes;
  std::string param;
};

/// The content of a message for the chat template (param: its path, messages[i].content). A
/// string stays as it is; a list of text parts becomes their texts joined by newlines; a list
/// with image_url parts ({"type": "image_url", "image_url": {"url": "data:...;base64,...",
/// "detail"}}, user messages only) becomes {"type": "text", "text"} and {"type": "image"} items
/// in its order, each picture's file appended to pictures (kMaxPictures at most in all). Throws
/// ApiError naming the part at fault.
nlohmann::ordered_json messageContent(const nlohmann::ordered_json& content, const std::string& param, bool user,
                                      std::vector<PictureFile>& pictures);

/// The pictures as the tower's rows, in order: each file decoded by image::decode (PNG or JPEG,
/// told by its bytes; one above maxPixels scaled down as decode does), then tower.picture.
/// A file that is no picture the tower reads is an ApiError naming its URL. One call at a time
/// in a process (the others wait), which bounds the memory of the pictures being decoded.
std::vector<llm::Picture> towerPictures(const std::vector<PictureFile>& files, const vision::Tower& tower,
                                        int64_t maxPixels);

}  // namespace gizml::ai
