#pragma once
// The tunings table behind Tile::tune, saveTunings and loadTunings: its keys and its file format
// (docs/tile.md, "Tuning"), apart so that tests and fuzz/fuzz_tunings.cpp reach the parser.
#include <gizml/tile.h>

#include <string>
#include <vector>

namespace gizml::tile::tuning {

/// The file's name in a tunings folder, and its first line.
inline constexpr const char* kFileName = "tunings.txt";
inline constexpr const char* kHeader = "gizml tile tunings 1";

/// One kept configuration: a kernel's name, the text of its key tensors, and the configuration.
struct Entry {
  std::string name;
  std::string key;
  Config config;
};

/// The key of tensors: dtype, shape, strides when not contiguous, and device of each, e.g.
/// "f32[1000,333]@cpu f32[333,777]@cpu".
std::string keyText(const std::vector<Tensor>& key);

/// Checks a kernel's name (non-empty printable ASCII without spaces, at most 200 characters) and
/// a configuration's value names; gizml::Error naming what is wrong, prefixed by `what`.
void checkName(const std::string& name, const std::string& what);
void checkConfig(const Config& config, const std::string& what);

/// The file's text: the header, then one line `name<TAB>key<TAB>config` per entry.
std::string format(const std::vector<Entry>& entries);
/// Parses a file's text; gizml::Error "FILE:LINE: what is wrong" for anything else. Empty lines
/// and lines starting with '#' are skipped.
std::vector<Entry> parse(const std::string& text, const std::string& file);

}  // namespace gizml::tile::tuning
