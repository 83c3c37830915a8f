// libFuzzer target: any bytes decode as a picture or throw gizml::Error (libpng's and libjpeg's
// errors included, never an abort); a picture decoded to a small budget keeps within it, has its
// bytes, and comes back the same through encodePng and decode.
// Seed corpus: the PNG and JPEG files of tests/data/image/ (tests/reference/make_image_fixtures.py).
#include <gizml/image.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gizml::image;
  constexpr int64_t kBudget = 4096;  // small, so that large pictures go through resize too
  Image image;
  try {
    image = decode(std::span<const uint8_t>(data, size), kBudget);
  } catch (const gizml::Error&) {
    return 0;
  }
  require(image.width >= 1 && image.height >= 1 && image.width * image.height <= kBudget);
  require(image.pixels.size() == size_t(image.width * image.height * 3));
  const Image back = decode(encodePng(image));
  require(back.width == image.width && back.height == image.height && back.pixels == image.pixels);
  return 0;
}
