#pragma once
// POST /v1/images/generations: OpenAI's request read (prompt, model, size, n, response_format,
// and seed as our extension), and its answer's base64.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gizml::ai {

/// What a served image model offers to the parser.
struct ImageTarget {
  std::string name;
  int64_t sizeMultiple = 16;  // width and height must be multiples of this
  int64_t maxSide = 2048;     // and at most this
};

/// The most images a request may ask for (n).
inline constexpr int kMaxImages = 4;

/// An images request, read.
struct ImageRequest {
  size_t target = 0;  // index into the targets
  std::string prompt;
  int64_t width = 1024, height = 1024;  // absent: 1024, or the target's largest square below it
  int n = 1;          // image i from seed + i
  uint64_t seed = 0;  // given, else fresh
};

/// Reads a body of POST /v1/images/generations. A model that is one of chatModels is refused
/// (400, naming it), an unknown one is 404. Throws ApiError.
ImageRequest parseImageRequest(const std::string& body, const std::vector<ImageTarget>& targets,
                               const std::vector<std::string>& chatModels);

/// RFC 4648 base64 with padding.
std::string base64(std::span<const uint8_t> bytes);

}  // namespace gizml::ai
