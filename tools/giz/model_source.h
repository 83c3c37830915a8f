#pragma once
// The converted model a command runs, from what the user named: a converted folder as it is; a
// Hugging Face folder or .gguf file converted once into our cache; a name on the hub
// (docs/models.md) fetched into the hub's cache and converted once, kept by repository, commit,
// file and bits.
#include <gizml/hub.h>

#include <filesystem>
#include <string>

/// The converted folder of model; bits: the layers' width (0: convert's default, 4).
std::string convertedFolder(const std::string& model, int bits = 0);

/// $XDG_CACHE_HOME/gizml/models, else ~/.cache/gizml/models.
std::filesystem::path convertedRoot();

/// Where the conversion of a hub snapshot at bits is kept: hub/{org}--{name}/{commit}/{variant}-{bits}bits,
/// variant being the GGUF file's path or "safetensors".
std::filesystem::path hubConversion(const gizml::hub::Snapshot& snapshot, int bits);

/// Converts source into dest once: under a lock (a second process waits, then finds it), into a
/// folder of its own that is renamed into place, so that an interrupted conversion is never taken for one.
void convertOnce(const std::filesystem::path& source, const std::filesystem::path& dest, int bits);

/// The catalogue alias a command uses when it names no model.
inline constexpr const char* kDefaultModel = "smollm2";

/// The converted folder of kDefaultModel; when it is neither cached nor reachable, an error that
/// says which model that is and how to get it.
std::string defaultConvertedFolder(int bits = 0);

/// True when word names a model (a local path, a hub name or an alias) rather than being a prompt.
bool namesModel(const std::string& word);

/// Parses the value of --bits: 2..8 or 16.
int parseBits(const std::string& text);
