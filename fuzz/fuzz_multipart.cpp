// libFuzzer target: the multipart/form-data parser (src/ai/multipart.h) on arbitrary bytes, the
// first line the Content-Type and the rest the body: nothing may crash or read past the input,
// every refusal is a MultipartError, a boundary is 1 to 70 characters, the parts stay within the
// limits, and the parts that parse, written back as a form of their own, parse the same.
// Seed corpus: fuzz/corpus/fuzz_multipart (forms as curl, Python and the openai client write them).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ai/multipart.h"

namespace {

using namespace gizml::ai;

void require(bool condition) {
  if (!condition) std::abort();
}

// A quoted-string of s, every byte that would end or break it escaped.
std::string quotedString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\' || c == '\r' || c == '\n') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string written(const std::vector<multipart::Part>& parts, const std::string& boundary) {
  std::string out;
  for (const multipart::Part& p : parts) {
    out += "--" + boundary + "\r\nContent-Disposition: form-data; name=" + quotedString(p.name);
    if (p.filename) out += "; filename=" + quotedString(*p.filename);
    out += "\r\n";
    if (!p.contentType.empty()) out += "Content-Type: " + p.contentType + "\r\n";
    out += "\r\n" + p.body + "\r\n";
  }
  return out + "--" + boundary + "--";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string_view contentType = input.substr(0, newline);
  const std::string_view body = newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);
  std::string boundary;
  try {
    boundary = multipart::boundary(contentType);
  } catch (const multipart::MultipartError&) {
    boundary = "b";  // the body is still worth reading
  }
  require(!boundary.empty() && boundary.size() <= 70);
  multipart::Limits limits;
  limits.parts = 8;  // small, so that inputs reach them
  limits.headerBytes = 256;
  std::vector<multipart::Part> parts;
  try {
    parts = multipart::parse(body, boundary, limits);
  } catch (const multipart::MultipartError&) {
    return 0;
  }
  require(parts.size() <= limits.parts);
  for (const multipart::Part& p : parts) require(body.find(p.body) != std::string_view::npos);
  const std::vector<multipart::Part> again = multipart::parse(written(parts, boundary), boundary);
  require(again.size() == parts.size());
  for (size_t i = 0; i < parts.size(); ++i)
    require(again[i].name == parts[i].name && again[i].filename == parts[i].filename &&
            again[i].contentType == parts[i].contentType && again[i].body == parts[i].body);
  return 0;
}
