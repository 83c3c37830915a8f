#include "ai/fingerprint.h"

#ifndef GIZML_BUILD_ID
#error "CMakeLists.txt defines GIZML_BUILD_ID for this file"
#endif

namespace gizml::ai {

std::string systemFingerprint(const llm::Model& model) {
  const std::string& conversion = model.conversion();
  return std::string("fp_") + GIZML_BUILD_ID + "_" + (conversion.empty() ? "parts" : conversion);
}

}  // namespace gizml::ai
