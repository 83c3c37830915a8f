#pragma once
// The modulated norm's checked rows, shared by modulatedNorm and modulatedInt8RowsInto.
#include <vector>

#include "netops/rows_common.h"

namespace gizml::netops::rows {

/// modulatedNorm's values of x ([rows, width]) in row-major order, after checking every argument
/// (named as fn's).
std::vector<float> modulatedRows(const char* fn, const Tensor& x, const Tensor& w, const Tensor& shift,
                                 const Tensor& scale, const Tensor& map, double eps, bool centered);

}  // namespace gizml::netops::rows
