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

/// Throws gizml::Error(message) unless condition holds. A message made by concatenation is built
/// before the call, whether or not the condition holds: on paths that run per element, per view
/// or per layer, test and throw instead.
inline void check(bool condition, const std::string& message) {
  if (!condition) [[unlikely]] throw Error(message);
}
/// The same for a literal message, which then costs no string unless the check fails.
inline void check(bool condition, const char* message) {
  if (!condition) [[unlikely]] throw Error(message);
}

}  // namespace gizml
