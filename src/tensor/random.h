#pragma once
// The single words of the random draws, for operations that need a few of them without the
// whole tensor (netops' attention dropout reads word (b tq + i) tk + j of a Key's draw).
#include <gizml/tensor.h>

#include <cstdint>

namespace gizml::tensor {

/// Element `index` of uniform(key, shape) with low 0 and high 1 (any shape holding it).
float uniformWord(const Key& key, uint64_t index);

}  // namespace gizml::tensor
