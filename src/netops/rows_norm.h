#pragma once
// The modulated norm's checks and rows, shared by modulatedNorm and modulatedInt8RowsInto.
#include <vector>

#include "netops/norm_gpu.h"
#include "netops/rows_common.h"

namespace gizml::netops::rows {

/// An Error (named as fn's) unless modulatedNorm's operands have matching shapes and eps >= 0;
/// the values are not read (a GPU's map is checked by its kernel).
void checkModulated(const char* fn, const Tensor& x, const Tensor& w, const Tensor& shift, const Tensor& scale,
                    const Tensor& map, double eps);
/// modulatedNorm's operands on a GPU, checked, as its kernels read them.
normgpu::Modulated modulatedGpu(const char* fn, const Tensor& x, const Tensor& w, const Tensor& shift,
                                const Tensor& scale, const Tensor& map, double eps, bool centered);

/// modulatedNorm's values of x ([rows, width]) in row-major order, after checking every argument
/// (named as fn's).
std::vector<float> modulatedRows(const char* fn, const Tensor& x, const Tensor& w, const Tensor& shift,
                                 const Tensor& scale, const Tensor& map, double eps, bool centered);

}  // namespace gizml::netops::rows
