#pragma once
// The hashes the hub names its files by, on OpenSSL's EVP digests.
#include <filesystem>
#include <string>

namespace gizml::hub {

/// SHA-256 of the file's bytes, 64 lower-case hex digits (an LFS file's oid).
std::string sha256OfFile(const std::filesystem::path& file);

/// git's blob id of the file: SHA-1 of "blob {size}\0" and its bytes (a git-kept file's ETag).
std::string gitBlobIdOfFile(const std::filesystem::path& file);

}  // namespace gizml::hub
