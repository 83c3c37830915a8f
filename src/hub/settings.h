#pragma once
// The hub's settings from the environment (Settings, settingsFromEnvironment: gizml/hub.h).
#include <gizml/hub.h>

namespace gizml::hub {

/// True for the hub's spellings of true: 1, ON, YES, TRUE (any case).
bool isTrue(const char* value);

}  // namespace gizml::hub
