#pragma once
// A model named on the hub, made present in the hub's cache (fetch, Snapshot: gizml/hub.h): the
// file list from the API, only the files the model needs downloaded (several at once, resumed,
// each checked against its SHA-256 or git blob id before it is renamed into place), linked into
// snapshots/{commit}/.
#include <gizml/hub.h>

#include <string>

namespace gizml::hub {

/// The snapshot of name in the cache when it holds every file the model needs, else kind=... with
/// an empty commit.
Snapshot cachedSnapshot(const ModelName& name, const Settings& settings);

/// Percent-encodes text for a URL, keeping [A-Za-z0-9._~-] and, when keepSlash, '/'.
std::string urlEncode(const std::string& text, bool keepSlash);

}  // namespace gizml::hub
