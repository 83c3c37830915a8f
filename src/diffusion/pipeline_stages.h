#pragma once
// What the image pipelines (ZImagePipeline, KleinPipeline) share: their size check and the
// timing of paint's stages.
#include <gizml/error.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace gizml::diffusion {

// A picture size of whole latent pixels (and patches): positive multiples of multiple.
inline void checkSize(const char* what, int64_t multiple, int64_t width, int64_t height) {
  check(width > 0 && height > 0 && width % multiple == 0 && height % multiple == 0,
        std::string(what) + ": the size " + std::to_string(width) + " x " + std::to_string(height) +
            " must be positive multiples of " + std::to_string(multiple));
}

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// stage's result; its seconds into seconds.
template <class Stage>
auto timed(double& seconds, Stage&& stage) {
  const auto start = std::chrono::steady_clock::now();
  auto out = stage();
  seconds = secondsSince(start);
  return out;
}

}  // namespace gizml::diffusion
