#pragma once
// How far apart two runs' logits are, in a unit that does not depend on their scale.
#include <algorithm>
#include <cmath>
#include <vector>

namespace gizml::test {

/// max |got - want| over the range of want (its largest value less its smallest).
inline double relativeMaxError(const std::vector<float>& got, const std::vector<float>& want) {
  const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, static_cast<double>(std::abs(got[i] - want[i])));
  return err / (*hi - *lo);
}

}  // namespace gizml::test
