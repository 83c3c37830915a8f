#pragma once
// An engine's KV format where the model leaves it to the engine (LoadOptions::kv unset): the
// spec's automatic setting, 8 bits, else 4, else keys in 4 and values in 2, the first in which
// the engine's whole pool fits the memory there is.
#include <gizml/kv_format.h>

#include <cstdint>
#include <functional>

namespace gizml::llm {

/// The first of "8", "4" and "4/2" whose pool of `pages` pages (pageBytes(format) bytes each)
/// fits in `available` bytes; available 0 (not known): "8". A format whose pages cannot be made
/// (pageBytes throws: heads too long to code) is passed over, and where none can, "16". An Error
/// naming the pool and the memory when none fits.
KvFormat chooseKvFormat(int64_t pages, int64_t available, const std::function<int64_t(const KvFormat&)>& pageBytes);

}  // namespace gizml::llm
