#pragma once
// Who may call the server: CORS (which web pages' origins may read its answers, preflights
// answered) and the API key (Authorization: Bearer KEY on every route but /health). Decided on a
// request's head alone, before its handler runs; no sockets here.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ai/http.h"

namespace gizml::ai {

struct AccessOptions {
  std::vector<std::string> corsOrigins;  // allowed Origin values; "*": any. Empty: no CORS headers
  std::string apiKey;                    // empty: no key asked for
};

class Access {
 public:
  explicit Access(AccessOptions options);

  /// The CORS headers a response to this request carries: Access-Control-Allow-Origin (and
  /// Vary: Origin) when its Origin is allowed, else none.
  std::vector<std::pair<std::string, std::string>> corsHeaders(const http::Request& request) const;

  /// The whole response when the request is answered here, before any route: OPTIONS (204, a
  /// preflight with the Access-Control-Allow-* headers when its Origin is allowed) and a missing
  /// or wrong API key (401, OpenAI's error object). nullopt: the request goes to its route.
  std::optional<std::string> answer(const http::Request& request, bool keepAlive) const;

 private:
  bool originAllowed(std::string_view origin) const;
  bool keyMatches(const http::Request& request) const;
  AccessOptions options_;
};

/// a == b in a time that depends on b's length only (not on where they first differ).
bool equalInConstantTime(std::string_view a, std::string_view b);

}  // namespace gizml::ai
