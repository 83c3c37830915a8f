#pragma once
// RFC 4648 base64 (the standard alphabet, with padding): the images' answers (b64_json) and the
// pictures of chat requests (data: URLs).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gizml::ai {

/// The bytes as base64 with padding.
std::string base64(std::span<const uint8_t> bytes);

/// The bytes of base64 text, read strictly: only the standard alphabet, a length that is a
/// multiple of 4, and '=' only as the last one or two characters; anything else (whitespace,
/// the URL-safe alphabet, missing padding) is nullopt.
std::optional<std::vector<uint8_t>> fromBase64(std::string_view text);

}  // namespace gizml::ai
