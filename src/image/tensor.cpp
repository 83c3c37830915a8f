// Images to and from F32 [3, H, W] tensors, in ComfyUI's f32 arithmetic: LoadImage's
// astype(float32) / 255, the VAE's image * 2 - 1 and clamp((image + 1) / 2, 0, 1), SaveImage's
// np.clip(255. * image, 0, 255).astype(uint8), which truncates.
#include <algorithm>
#include <cmath>
#include <string>

#include <gizml/image.h>

namespace gizml::image {

tensor::Tensor toTensor(const Image& image, Range range) {
  check(image.width >= 1 && image.height >= 1 && image.pixels.size() == size_t(image.width * image.height * 3),
        "image::toTensor: the image has " + std::to_string(image.pixels.size()) + " bytes of pixels for " +
            std::to_string(image.width) + " x " + std::to_string(image.height) + " RGB pixels");
  const int64_t plane = image.width * image.height;
  tensor::Tensor out = tensor::empty({3, image.height, image.width});
  float* values = out.data<float>();
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c) {
      const float x = float(image.pixels[size_t(i * 3 + c)]) / 255.0f;
      values[c * plane + i] = range == Range::MinusOneOne ? x * 2.0f - 1.0f : x;
    }
  return out;
}

Image fromTensor(const tensor::Tensor& pixels, Range range) {
  check(pixels.ndim() == 3 && pixels.size(0) == 3 && pixels.size(1) >= 1 && pixels.size(2) >= 1,
        "image::fromTensor: the pixels must be [3, height, width], not " + tensor::shapeText(pixels.shape()));
  check(pixels.size(1) <= kMaxSide && pixels.size(2) <= kMaxSide,
        "image::fromTensor: " + tensor::shapeText(pixels.shape()) + " is larger than " + std::to_string(kMaxSide) +
            " pixels a side");
  const tensor::Tensor host = pixels.host().cast(DType::F32).contiguous();
  const float* values = host.data<float>();
  Image image{pixels.size(2), pixels.size(1), {}};
  const int64_t plane = image.width * image.height;
  image.pixels.resize(size_t(plane * 3));
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c) {
      float x = values[c * plane + i];
      if (range == Range::MinusOneOne) x = std::clamp((x + 1.0f) / 2.0f, 0.0f, 1.0f);
      x = 255.0f * x;
      // NaN fails both comparisons and gives 0, as NumPy's cast does on x86.
      image.pixels[size_t(i * 3 + c)] = x >= 255.0f ? 255 : x > 0.0f ? uint8_t(x) : 0;
    }
  return image;
}

}  // namespace gizml::image
