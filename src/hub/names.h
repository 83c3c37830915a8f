#pragma once
// Model names on the hub (ModelName, parseName, the catalogue: gizml/hub.h) and the paths a
// repository may hold.
#include <gizml/hub.h>

#include <string>

namespace gizml::hub {

/// True when path is a safe relative path inside a repository (no "..", no absolute path,
/// no backslash or control character, no empty segment).
bool safeRepoPath(const std::string& path);

}  // namespace gizml::hub
