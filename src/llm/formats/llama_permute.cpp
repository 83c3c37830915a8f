#include "llm/formats/llama_permute.h"

#include <gizml/error.h>

namespace gizml::llm {

tensor::Tensor unpermuteLlamaRows(const tensor::Tensor& permuted, int64_t heads, const std::string& what) {
  check(permuted.ndim() >= 1 && heads > 0, what + ": cannot un-permute a scalar");
  const int64_t rows = permuted.size(0);
  check(rows % (2 * heads) == 0, what + ": " + std::to_string(rows) + " rows are not " +
                                     std::to_string(heads) + " heads of an even size");
  // [heads, half, 2, rest] -> [heads, 2, half, rest]: a view and one copy.
  const int64_t half = rows / heads / 2;
  tensor::Shape split = {heads, half, 2};
  for (int64_t d = 1; d < permuted.ndim(); ++d) split.push_back(permuted.size(d));
  tensor::Axes axes = {0, 2, 1};
  for (int64_t d = 3; d < static_cast<int64_t>(split.size()); ++d) axes.push_back(d);
  return permuted.contiguous().reshape(split).permute(axes).contiguous().reshape(permuted.shape());
}

}  // namespace gizml::llm
