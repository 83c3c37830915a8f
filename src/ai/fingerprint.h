#pragma once
// system_fingerprint: which build served an answer, on which conversion of the model.
#include <gizml/llm.h>

#include <string>

namespace gizml::ai {

/// "fp_" + the build (git describe at configure time, else the project version) + "_" + the
/// model's conversion hash (Model::conversion(); "parts" for a model made in code).
std::string systemFingerprint(const llm::Model& model);

}  // namespace gizml::ai
