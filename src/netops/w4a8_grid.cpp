// netops::w4a8Grid (gizml/netops_rows.h): the operands checked here, then a GPU kernel
// (w4a8_grid_gpu.h) or this host loop, in parallel over rows.
#include <gizml/error.h>
#include <gizml/netops.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/thread_pool.h"
#include "netops/w4a8_grid_gpu.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops {

Tensor w4a8Grid(const Tensor& packed, const Tensor& scales, const Tensor& levels, int64_t group) {
  constexpr const char* fn = "w4a8Grid";
  const auto gpu = gpuops::deviceOf(fn, {{"packed", &packed}, {"scales", &scales}, {"levels", &levels}});
  const bool shapes = packed.ndim() == 2 && packed.dtype() == DType::I8 && group > 0 &&
                      (2 * packed.size(1)) % group == 0 && scales.ndim() == 2 && scales.dtype() == DType::F32 &&
                      scales.size(0) == packed.size(0) && scales.size(1) == 2 * packed.size(1) / group &&
                      levels.shape() == tensor::Shape{16} && levels.dtype() == DType::F32;
  if (!shapes)
    throw Error(std::string(fn) + ": packed " + tensor::shapeText(packed.shape()) + " " + dtypeName(packed.dtype()) +
                ", scales " + tensor::shapeText(scales.shape()) + " " + dtypeName(scales.dtype()) + ", levels " +
                tensor::shapeText(levels.shape()) + " " + dtypeName(levels.dtype()) + " and group " +
                std::to_string(group) + " are not [rows, in / 2] i8, [rows, in / group] f32 and [16] f32");
  const int64_t rows = packed.size(0), in = 2 * packed.size(1);
  if (gpu) {
    Tensor out = gpuops::empty({rows, in}, DType::I8, gpu);
    w4a8gpu::w4a8Grid(packed.contiguous(), scales.contiguous(), levels.contiguous(), group, out);
    return out;
  }
  const Tensor bytes = packed.contiguous(), s = scales.contiguous(), l = levels.contiguous();
  Tensor out = tensor::empty({rows, in}, DType::I8);
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data<int8_t>());
  const float* scale = s.data<float>();
  const float* level = l.data<float>();
  int8_t* g = out.data<int8_t>();
  core::parallelFor(rows, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < in; ++c) {
        const int code = (b[r * (in / 2) + c / 2] >> (4 * (c % 2))) & 0xF;
        // torch: a float32 level times a float32 scale, round() half to even, clamp.
        const float v = std::nearbyint(level[code] * scale[r * (in / group) + c / group]);
        g[r * in + c] =
            std::isnan(v) ? int8_t{0} : static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));  // as the GPU's
      }
  });
  return out;
}

}  // namespace gizml::netops
