#pragma once
// HTTPS for the hub, on libcurl: redirects followed, proxies from the environment (curl reads
// HTTPS_PROXY and NO_PROXY itself), connect and low-speed timeouts, retries with exponential
// backoff on connection errors and on 5xx / 429, downloads resumed with Range. The token goes
// only to the endpoint's own host: libcurl drops headers we set when a redirect leaves the host
// and port it was given (the hub's CDN must not see it, as huggingface_hub does).
#include <gizml/error.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace gizml::hub {

/// The server answered, with a status that is not success.
class HttpError : public Error {
 public:
  HttpError(const std::string& message, long status, std::string errorCode)
      : Error(message), status(status), errorCode(std::move(errorCode)) {}
  long status;
  std::string errorCode;  // the hub's X-Error-Code (RepoNotFound, GatedRepo, ...), when it sent one
};

/// The server could not be reached (or the connection kept failing) after the retries.
class UnreachableError : public Error {
 public:
  using Error::Error;
};

class HttpClient {
 public:
  /// token: sent as "Authorization: Bearer" when not empty.
  explicit HttpClient(std::string token);

  /// The body of a GET (at most 64 MiB). Throws HttpError or UnreachableError.
  std::string get(const std::string& url) const;

  /// Appends url's bytes to file from its current size (a Range request when it has some), until
  /// the whole body is there; a connection that drops is resumed from where it stopped.
  /// onBytes(bytes in file) is called as they arrive. Throws HttpError or UnreachableError.
  void download(const std::string& url, const std::filesystem::path& file,
                const std::function<void(int64_t)>& onBytes) const;

  /// Attempts per request (the first and its retries) and the first backoff.
  static constexpr int kAttempts = 4;
  static constexpr int kFirstBackoffMs = 250;

 private:
  std::string token_;
};

}  // namespace gizml::hub
