// CORS and the API key (access.h).
#include "ai/access.h"

#include <algorithm>

#include "ai/error_response.h"

namespace gizml::ai {
namespace {

constexpr const char* kMethods = "GET, POST, OPTIONS";
constexpr const char* kDefaultAllowedHeaders = "Authorization, Content-Type";
constexpr const char* kPreflightMaxAgeSeconds = "7200";  // the most Chromium caches a preflight

bool isTokenList(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == ',' || c == ' ' || c == '.';
  });
}

bool startsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    const char a = s[i] >= 'A' && s[i] <= 'Z' ? static_cast<char>(s[i] - 'A' + 'a') : s[i];
    if (a != prefix[i]) return false;
  }
  return true;
}

}  // namespace

bool equalInConstantTime(std::string_view a, std::string_view b) {
  // Every byte of b is read whatever a holds; the differences are or-ed, never branched on.
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff |= x ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

Access::Access(AccessOptions options) : options_(std::move(options)) {}

bool Access::originAllowed(std::string_view origin) const {
  for (const std::string& allowed : options_.corsOrigins)
    if (allowed == "*" || allowed == origin) return true;
  return false;
}

std::vector<std::pair<std::string, std::string>> Access::corsHeaders(const http::Request& request) const {
  if (options_.corsOrigins.empty()) return {};
  const std::string* origin = request.header("origin");
  const bool any = std::find(options_.corsOrigins.begin(), options_.corsOrigins.end(), "*") != options_.corsOrigins.end();
  if (any) return origin ? std::vector<std::pair<std::string, std::string>>{{"Access-Control-Allow-Origin", "*"}}
                         : std::vector<std::pair<std::string, std::string>>{};
  // The answer depends on the Origin, also when it is refused or absent: a cache must not give
  // one origin's answer (without the header) to another.
  if (!origin || !originAllowed(*origin)) return {{"Vary", "Origin"}};
  return {{"Access-Control-Allow-Origin", *origin}, {"Vary", "Origin"}};
}

bool Access::keyMatches(const http::Request& request) const {
  const std::string* authorization = request.header("authorization");
  if (!authorization || !startsWithNoCase(*authorization, "bearer ")) return false;
  std::string_view given(*authorization);
  given.remove_prefix(7);
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  return equalInConstantTime(given, options_.apiKey);
}

std::optional<std::string> Access::answer(const http::Request& request, bool keepAlive) const {
  std::vector<std::pair<std::string, std::string>> headers = corsHeaders(request);
  if (request.method == "OPTIONS") {
    // A browser's preflight asks before it sends the request (and sends no key with it).
    const std::string* method = request.header("access-control-request-method");
    const bool allowed = std::any_of(headers.begin(), headers.end(),
                                     [](const auto& h) { return h.first == "Access-Control-Allow-Origin"; });
    if (allowed && method) {
      headers.emplace_back("Access-Control-Allow-Methods", kMethods);
      const std::string* asked = request.header("access-control-request-headers");
      headers.emplace_back("Access-Control-Allow-Headers", asked && isTokenList(*asked) ? *asked : kDefaultAllowedHeaders);
      headers.emplace_back("Access-Control-Max-Age", kPreflightMaxAgeSeconds);
    }
    headers.emplace_back("Allow", kMethods);
    return http::response(204, "", "", keepAlive, headers);
  }
  if (options_.apiKey.empty() || request.path() == "/health" || keyMatches(request)) return std::nullopt;
  const std::string message = request.header("authorization")
                                  ? "Incorrect API key provided: send the server's key as 'Authorization: Bearer KEY'"
                                  : "No API key provided: send 'Authorization: Bearer KEY' (the key giz serve was given)";
  headers.emplace_back("WWW-Authenticate", "Bearer");
  return errorResponse(401, message, keepAlive, "", "invalid_api_key", headers);
}

}  // namespace gizml::ai
