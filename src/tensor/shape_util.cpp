#include "tensor/shape_util.h"

#include <algorithm>

namespace gizml::tensor {

int64_t elementCount(const Shape& shape) {
  // Called by every numel(): the messages are built only when a check fails.
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) [[unlikely]]
      throw Error("shape " + shapeText(shape) + " has a negative dimension");
    if (d != 0 && n > INT64_MAX / d)
      throw Error("shape " + shapeText(shape) + " has more elements than fit in 64 bits");
    n *= d;
  }
  return n;
}

int64_t normalizeAxis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank) [[unlikely]]
    throw Error(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for rank " +
                std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Axes normalizeAxes(const Axes& axes, int64_t rank, const char* what) {
  Axes out;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalizeAxis(a, rank, what));
  std::sort(out.begin(), out.end());
  check(std::adjacent_find(out.begin(), out.end()) == out.end(),
        std::string(what) + ": axis repeated in " + shapeText(axes));
  return out;
}

Shape contiguousStrides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

Shape inferShape(const Shape& requested, int64_t count) {
  Shape shape = requested;
  int64_t known = 1, unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      check(unknown < 0, "reshape: more than one -1 in " + shapeText(requested));
      unknown = static_cast<int64_t>(i);
    } else {
      check(shape[i] >= 0, "reshape: negative dimension in " + shapeText(requested));
      known = shape[i] == 0 ? 0 : known;
      if (shape[i] != 0) {
        check(known <= INT64_MAX / shape[i], "reshape: " + shapeText(requested) + " overflows");
        known *= shape[i];
      }
    }
  }
  if (unknown >= 0) {
    check(known != 0 && count % known == 0,
          "reshape: cannot infer -1 in " + shapeText(requested) + " for " + std::to_string(count) +
              " elements");
    shape[unknown] = count / known;
  }
  check(elementCount(shape) == count, "reshape: shape " + shapeText(requested) + " does not hold " +
                                          std::to_string(count) + " elements");
  return shape;
}

std::optional<Shape> viewStrides(const Shape& shape, const Shape& strides, const Shape& target) {
  // Walk both shapes in groups of axes with equal element counts; each old group must be one
  // contiguous run in memory to be re-split (the rule of torch's view).
  Shape out(target.size());
  if (elementCount(shape) == 0) return contiguousStrides(target);
  size_t oldStart = 0, newStart = 0;
  while (oldStart < shape.size() || newStart < target.size()) {
    // Skip length-1 axes on either side: they take any stride.
    if (newStart < target.size() && target[newStart] == 1) {
      out[newStart] = 1;
      ++newStart;
      continue;
    }
    if (oldStart < shape.size() && shape[oldStart] == 1) {
      ++oldStart;
      continue;
    }
    if (oldStart >= shape.size() || newStart >= target.size()) return std::nullopt;
    size_t oldEnd = oldStart, newEnd = newStart;
    int64_t oldCount = shape[oldEnd++], newCount = target[newEnd++];
    while (oldCount != newCount) {
      if (oldCount < newCount) {
        if (oldEnd >= shape.size()) return std::nullopt;
        oldCount *= shape[oldEnd++];
      } else {
        if (newEnd >= target.size()) return std::nullopt;
        newCount *= target[newEnd++];
      }
    }
    // The old group [oldStart, oldEnd) must be contiguous among its non-unit axes.
    int64_t prev = -1;
    for (size_t i = oldStart; i < oldEnd; ++i) {
      if (shape[i] == 1) continue;
      if (prev >= 0 && strides[prev] != strides[i] * shape[i]) return std::nullopt;
      prev = static_cast<int64_t>(i);
    }
    int64_t stride = strides[prev];
    for (size_t i = newEnd; i-- > newStart;) {
      out[i] = stride;
      stride *= target[i];
    }
    oldStart = oldEnd;
    newStart = newEnd;
  }
  return out;
}

std::string i4ViewProblem(const Shape& shape, const Shape& strides, int64_t offset) {
  // The axes that step through memory: length-1 axes are never stepped along, and broadcast
  // axes (stride 0) read the same elements again.
  Shape sizes, steps;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return "";
    if (shape[i] != 1 && strides[i] != 0) sizes.push_back(shape[i]), steps.push_back(strides[i]);
  }
  if (offset % 2 != 0) return "would start in the middle of a byte (at element " + std::to_string(offset) + ")";
  if (sizes.empty() || steps == contiguousStrides(sizes)) return "";  // one run from a byte's start
  // Otherwise rows of whole bytes: the innermost axis runs over pairs (stride 1, even length),
  // the others step by whole bytes.
  const size_t last = sizes.size() - 1;
  bool pairs = steps[last] == 1 && sizes[last] % 2 == 0;
  for (size_t i = 0; pairs && i < last; ++i) pairs = steps[i] % 2 == 0;
  if (pairs) return "";
  return "would put the two elements of a byte apart (shape " + shapeText(shape) + ", strides " + shapeText(strides) + ")";
}

Shape broadcastStrides(const Shape& shape, const Shape& strides, const Shape& target) {
  check(target.size() >= shape.size(), "cannot broadcast shape " + shapeText(shape) + " to " +
                                           shapeText(target) + ": fewer dimensions");
  Shape out(target.size(), 0);
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == target[lead + i]) {
      out[lead + i] = strides[i];
    } else {
      check(shape[i] == 1, "cannot broadcast shape " + shapeText(shape) + " to " + shapeText(target));
    }
  }
  elementCount(target);
  return out;
}

Coalesced coalesceAxes(const Shape& shape, const std::vector<Shape>& strides) {
  Coalesced c;
  c.strides.resize(strides.size());
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] == 1) continue;
    bool mergeable = !c.dims.empty();
    for (size_t l = 0; l < strides.size() && mergeable; ++l)
      mergeable = c.strides[l].back() == strides[l][axis] * shape[axis];
    if (mergeable) {
      c.dims.back() *= shape[axis];
      for (size_t l = 0; l < strides.size(); ++l) c.strides[l].back() = strides[l][axis];
    } else {
      c.dims.push_back(shape[axis]);
      for (size_t l = 0; l < strides.size(); ++l) c.strides[l].push_back(strides[l][axis]);
    }
  }
  if (c.dims.empty()) {
    c.dims.push_back(1);
    for (auto& m : c.strides) m.push_back(0);
  }
  return c;
}

Shape broadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    check(da == db || da == 1 || db == 1,
          "shapes " + shapeText(a) + " and " + shapeText(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  elementCount(out);
  return out;
}

}  // namespace gizml::tensor
