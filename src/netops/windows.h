#pragma once
// The output length of a sliding window, with the checks of its arguments.
#include <cstdint>

namespace gizml::netops::detail {

/// Windows of `size` taps `dilation` apart at `stride` over `length` values with `pad` zeros on
/// each side: (length + 2 pad - dilation (size - 1) - 1) / stride + 1. An Error naming `fn` and
/// `sizeName` when an argument is out of range or no window fits.
int64_t windowCount(const char* fn, const char* sizeName, int64_t length, int64_t size, int64_t stride, int64_t pad,
                    int64_t dilation);

}  // namespace gizml::netops::detail
