#pragma once
// Helpers that several netops functions share on contiguous F32 host tensors.
#include <gizml/netops.h>

namespace gizml::netops::detail {

/// x [rows, in] times w [out, in] transposed (cpu::sgemm's order), plus bias [out] when given:
/// [rows, out]. All contiguous F32 on the host.
Tensor productPlusBias(const Tensor& x, const Tensor& w, const Tensor* bias);

}  // namespace gizml::netops::detail
