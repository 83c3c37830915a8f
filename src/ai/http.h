#pragma once
// HTTP/1.1 requests as gizml::ai's server reads them (RFC 9112): a strict parser with limits on
// every size, and the responses it writes. No sockets here (socket.h), so the fuzzer and the
// tests drive the parser with bytes alone.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gizml::ai::http {

struct Limits {
  size_t requestLine = 8 * 1024;  // longer: 414
  size_t headerBytes = 32 * 1024; // all header lines together; more: 431
  size_t headerCount = 100;       // more: 431
  size_t body = 8 * 1024 * 1024;  // a larger Content-Length: 413
};

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // "/v1/models" (origin form; the query string kept)
  int minor = 1;       // HTTP/1.minor
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;
  bool keepAlive = true;        // HTTP/1.1 unless "Connection: close"; 1.0 only with keep-alive
  bool expectContinue = false;  // "Expect: 100-continue"

  /// The value of the header name (lower case), or nullptr.
  const std::string* header(std::string_view name) const;
  /// The target without its query string.
  std::string_view path() const;
};

struct Parse {
  enum Kind { Incomplete, Complete, Error };
  Kind kind = Incomplete;
  size_t consumed = 0;       // Complete: the bytes of this request (a pipelined next one follows)
  bool headersDone = false;  // the head is read and valid (Incomplete: the body is still coming)
  size_t needed = 0;         // headersDone: the bytes of the whole request (head and body)
  int status = 0;            // Error: 400, 411, 413, 414, 431, 501 or 505
  std::string message;       // Error: what is wrong
};

/// Parses the request at the start of data into out. Incomplete: more bytes are needed (none of
/// the limits is exceeded so far). Never reads past data, whatever the bytes.
Parse parseRequest(std::string_view data, const Limits& limits, Request& out);

/// The reason phrase of a status code ("Not Found").
const char* reason(int status);

/// A whole response with Content-Length (none on 204).
std::string response(int status, std::string_view contentType, std::string_view body, bool keepAlive,
                     const std::vector<std::pair<std::string, std::string>>& extraHeaders = {});
/// The head of a streamed response (Server-Sent Events): chunked, where chunk() frames each piece
/// of its body and lastChunk() ends it; else (HTTP/1.0) the body runs to the connection's close.
std::string streamHead(int status, std::string_view contentType, bool keepAlive, bool chunked = true);
std::string chunk(std::string_view data);
std::string lastChunk();

/// While one lives, every response head made on its thread (response(), streamHead()) carries
/// these headers too: the transport sets a request's CORS headers so around the thread that
/// answers it, whatever route writes the answer.
class ThreadHeaders {
 public:
  explicit ThreadHeaders(std::vector<std::pair<std::string, std::string>> headers);
  ~ThreadHeaders();
  ThreadHeaders(const ThreadHeaders&) = delete;
  ThreadHeaders& operator=(const ThreadHeaders&) = delete;

 private:
  std::vector<std::pair<std::string, std::string>> previous_;
};

}  // namespace gizml::ai::http
