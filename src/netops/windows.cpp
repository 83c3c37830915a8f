// The output length of sliding windows (im2col, the 1-D convolutions, pooling), checked.
#include "netops/windows.h"

#include "netops/operand.h"

namespace gizml::netops::detail {

int64_t windowCount(const char* fn, const char* sizeName, int64_t length, int64_t size, int64_t stride, int64_t pad,
                    int64_t dilation) {
  requireAtLeast(fn, sizeName, size, 1);
  requireAtLeast(fn, "stride", stride, 1);
  requireAtLeast(fn, "pad", pad, 0);
  requireAtLeast(fn, "dilation", dilation, 1);
  const int64_t span = dilation * (size - 1) + 1;
  check(length + 2 * pad >= span, where(fn) + sizeName + " = " + std::to_string(size) + " spans " +
                                       std::to_string(span) + " values, more than the " + std::to_string(length) +
                                       " (padded: " + std::to_string(length + 2 * pad) + ") of the input");
  return (length + 2 * pad - span) / stride + 1;
}

}  // namespace gizml::netops::detail
