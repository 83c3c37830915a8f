// multipart/form-data bodies (multipart.h).
#include "ai/multipart.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace gizml::ai::multipart {
namespace {

using Parameters = std::vector<std::pair<std::string, std::string>>;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Some of `text` for an error message: bounded, control bytes shown as '?'.
std::string quoted(std::string_view text) {
  std::string out(text.substr(0, 40));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return "'" + out + (text.size() > 40 ? "...'" : "'");
}

bool space(char c) { return c == ' ' || c == '\t'; }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// RFC 2045's token characters.
bool tokenChar(char c) {
  return c > 0x20 && c < 0x7f && std::string_view("()<>@,;:\\\"/[]?=").find(c) == std::string_view::npos;
}

// The value's type ("multipart/form-data") and its "; key=value" parameters (keys lower case,
// values tokens or quoted strings with backslash escapes). `what` names the header in errors.
std::pair<std::string, Parameters> parameterized(std::string_view value, const std::string& what) {
  const size_t semicolon = value.find(';');
  std::pair<std::string, Parameters> out{lower(trimmed(value.substr(0, semicolon))), {}};
  size_t at = semicolon;
  while (at != std::string_view::npos && at < value.size()) {
    ++at;  // past ';'
    while (at < value.size() && space(value[at])) ++at;
    if (at == value.size()) break;  // a trailing ';'
    const size_t equals = value.find('=', at);
    if (equals == std::string_view::npos)
      throw MultipartError(what + ": parameter " + quoted(value.substr(at)) + " has no '='");
    const std::string_view key = trimmed(value.substr(at, equals - at));
    if (key.empty() || !std::all_of(key.begin(), key.end(), tokenChar))
      throw MultipartError(what + ": " + quoted(key) + " is not a parameter name");
    at = equals + 1;
    while (at < value.size() && space(value[at])) ++at;
    std::string text;
    if (at < value.size() && value[at] == '"') {
      for (++at;; ++at) {
        if (at >= value.size()) throw MultipartError(what + ": the quoted value of " + quoted(key) + " is not closed");
        if (value[at] == '"') break;
        if (value[at] == '\\' && at + 1 < value.size()) ++at;
        text += value[at];
      }
      ++at;
    } else {
      while (at < value.size() && tokenChar(value[at])) text += value[at++];
      if (text.empty()) throw MultipartError(what + ": " + quoted(key) + " has no value");
    }
    while (at < value.size() && space(value[at])) ++at;
    if (at < value.size() && value[at] != ';')
      throw MultipartError(what + ": unexpected " + quoted(value.substr(at)) + " after " + quoted(key));
    out.second.emplace_back(lower(key), std::move(text));
  }
  return out;
}

const std::string* parameter(const Parameters& ps, const std::string& key, const std::string& what) {
  const std::string* found = nullptr;
  for (const auto& [k, v] : ps) {
    if (k != key) continue;
    if (found) throw MultipartError(what + ": " + key + " given twice");
    found = &v;
  }
  return found;
}

// One header line of a part (`where`) into `part`; `disposed`: its Content-Disposition was read.
void readHeader(std::string_view line, Part& part, bool& disposed, const std::string& where) {
  if (space(line.front())) throw MultipartError(where + ": a folded header line " + quoted(line) + " (not allowed)");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) throw MultipartError(where + ": header line " + quoted(line) + " has no ':'");
  const std::string name = lower(line.substr(0, colon));
  const std::string_view value = trimmed(line.substr(colon + 1));
  if (name == "content-disposition") {
    if (disposed) throw MultipartError(where + ": Content-Disposition given twice");
    disposed = true;
    const auto [type, ps] = parameterized(value, where + ": Content-Disposition");
    if (type != "form-data")
      throw MultipartError(where + ": Content-Disposition " + quoted(type) + " is not form-data");
    const std::string* field = parameter(ps, "name", where + ": Content-Disposition");
    if (!field) throw MultipartError(where + ": Content-Disposition has no name");
    part.name = *field;
    if (const std::string* file = parameter(ps, "filename", where + ": Content-Disposition")) part.filename = *file;
  } else if (name == "content-type") {
    part.contentType = std::string(value);
  }
}

}  // namespace

std::string boundary(std::string_view contentType) {
  const auto [type, ps] = parameterized(contentType, "Content-Type");
  if (type != "multipart/form-data")
    throw MultipartError("Content-Type " + quoted(type) + " is not multipart/form-data");
  const std::string* b = parameter(ps, "boundary", "Content-Type");
  if (!b) throw MultipartError("Content-Type multipart/form-data has no boundary");
  static const std::string_view kBoundaryChars = "'()+_,-./:=? ";  // RFC 2046's bchars besides letters and digits
  const bool allowed = std::all_of(b->begin(), b->end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || kBoundaryChars.find(c) != std::string_view::npos;
  });
  if (b->empty() || b->size() > 70 || b->back() == ' ' || !allowed)
    throw MultipartError("Content-Type: boundary " + quoted(*b) + " is not 1 to 70 of RFC 2046's characters");
  return *b;
}

std::vector<Part> parse(std::string_view body, std::string_view boundary, const Limits& limits) {
  const std::string dash = "--" + std::string(boundary), delimiter = "\r\n" + dash;
  size_t at;  // where the next dash-boundary starts
  if (body.substr(0, dash.size()) == dash) {
    at = 0;
  } else {
    at = body.find(delimiter);
    if (at == std::string_view::npos) throw MultipartError("the body holds no boundary " + quoted(dash));
    at += 2;
  }
  std::vector<Part> parts;
  for (;;) {
    at += dash.size();
    if (body.substr(at, 2) == "--") return parts;  // the close delimiter; the epilogue is ignored
    const std::string where = "part " + std::to_string(parts.size() + 1);
    if (parts.size() == limits.parts) throw MultipartError("more than " + std::to_string(limits.parts) + " parts");
    while (at < body.size() && space(body[at])) ++at;  // transport padding
    if (body.substr(at, 2) != "\r\n")
      throw MultipartError(where + ": its boundary line does not end in CRLF");
    at += 2;
    Part part;
    bool disposed = false;
    const size_t headersStart = at;
    for (;;) {
      const size_t end = body.find("\r\n", at);
      if (end == std::string_view::npos || end - headersStart > limits.headerBytes)
        throw MultipartError(where + (end == std::string_view::npos ? ": its headers do not end in an empty line"
                                                                    : ": its headers exceed " +
                                                                          std::to_string(limits.headerBytes) + " bytes"));
      const std::string_view line = body.substr(at, end - at);
      at = end + 2;
      if (line.empty()) break;
      readHeader(line, part, disposed, where);
    }
    if (!disposed) throw MultipartError(where + ": no Content-Disposition");
    const size_t end = body.find(delimiter, at);
    if (end == std::string_view::npos)
      throw MultipartError(where + " (" + quoted(part.name) + "): the body ends before its closing boundary " +
                           quoted(dash + "--"));
    part.body = std::string(body.substr(at, end - at));
    parts.push_back(std::move(part));
    at = end + 2;
  }
}

}  // namespace gizml::ai::multipart
