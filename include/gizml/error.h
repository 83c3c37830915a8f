#pragma once
// The one exception type of gizml: every bad input, shape or file becomes a gizml::Error whose
// message names what is wrong.
#include <stdexcept>
#include <string>

namespace gizml {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Throws gizml::Error(message) unless condition holds.
inline void check(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}

}  // namespace gizml
