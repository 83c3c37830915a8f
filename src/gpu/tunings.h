#pragma once
// The kernel tunings table (gizhw::gpu::saveTunings / loadTunings; Tile::tune fills it): the
// configuration kept per kernel name and key text, and its file format (docs/tile.md, "Tuning"),
// apart so that Tile::tune, the tests and fuzz/fuzz_tunings.cpp reach it.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gizhw::gpu::tuning {

/// The file's name in a tunings folder, and its first line.
inline constexpr const char* kFileName = "tunings.txt";
inline constexpr const char* kHeader = "gizml tile tunings 1";

/// A configuration: block sizes, warps, stages, ... by name.
using Values = std::map<std::string, int64_t>;

/// One kept configuration: a kernel's name, the text of its key tensors, and the configuration.
struct Entry {
  std::string name;
  std::string key;
  Values config;
};

/// "bm=128,bn=128,warps=8" (names in order).
std::string text(const Values& config);

/// Checks a kernel's name (non-empty printable ASCII without spaces, at most 200 characters) and
/// a configuration's value names; gizml::Error naming what is wrong, prefixed by `what`.
void checkName(const std::string& name, const std::string& what);
void checkConfig(const Values& config, const std::string& what);

/// The file's text: the header, then one line `name<TAB>key<TAB>config` per entry.
std::string format(const std::vector<Entry>& entries);
/// Parses a file's text; gizml::Error "FILE:LINE: what is wrong" for anything else. Empty lines
/// and lines starting with '#' are skipped.
std::vector<Entry> parse(const std::string& text, const std::string& file);

/// The configuration kept for name and key, if any.
std::optional<Values> kept(const std::string& name, const std::string& key);
/// Keeps a configuration just measured (counted by tuningsMeasured()).
void keepMeasured(const std::string& name, const std::string& key, const Values& config);

}  // namespace gizhw::gpu::tuning
