#include "hub/checksum.h"

#include <gizml/error.h>
#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <vector>

namespace fs = std::filesystem;

namespace gizml::hub {

namespace {

std::string digestOf(const fs::path& file, const EVP_MD* type, const std::string& prefix) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), type, nullptr) != 1) throw Error("OpenSSL: cannot start a digest");
  EVP_DigestUpdate(ctx.get(), prefix.data(), prefix.size());
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot read");
  std::vector<char> buffer(size_t(1) << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(file.string() + ": read error");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &length) != 1) throw Error("OpenSSL: cannot finish a digest");
  static const char* const hex = "0123456789abcdef";
  std::string text;
  for (unsigned int i = 0; i < length; ++i) {
    text += hex[digest[i] >> 4];
    text += hex[digest[i] & 15];
  }
  return text;
}

}  // namespace

std::string sha256OfFile(const fs::path& file) { return digestOf(file, EVP_sha256(), ""); }

std::string gitBlobIdOfFile(const fs::path& file) {
  const std::string header = "blob " + std::to_string(fs::file_size(file));
  return digestOf(file, EVP_sha1(), std::string(header.c_str(), header.size() + 1));
}

}  // namespace gizml::hub
