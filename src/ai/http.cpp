// The HTTP/1.1 request parser (RFC 9112's grammar, strictly) and the responses.
#include "ai/http.h"

#include <algorithm>
#include <cstdint>

namespace gizml::ai::http {
namespace {

bool isTchar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool isToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return isTchar(static_cast<unsigned char>(c)); });
}

// A field value's bytes: visible ASCII, obs-text, space and tab.
bool isFieldValue(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c == '\t' || c >= 0x20 ? c != 0x7f : false;
  });
}

// The request target's bytes: visible ASCII and obs-text (no spaces, no controls).
bool isTargetChars(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c > 0x20 && c != 0x7f;
  });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The comma-separated elements of a header value, trimmed, empty ones dropped.
std::vector<std::string_view> listOf(std::string_view value) {
  std::vector<std::string_view> items;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string_view item = trim(value.substr(start, comma - start));
    if (!item.empty()) items.push_back(item);
    start = comma + 1;
  }
  return items;
}

Parse failure(int status, std::string message) {
  Parse p;
  p.kind = Parse::Error;
  p.status = status;
  p.message = std::move(message);
  return p;
}

// One line from data[at..]: where it ends (before CRLF or LF) and where the next begins. A
// carriage return anywhere but before the line feed is Bad; Long: more than maxLength bytes.
struct Line {
  enum State { Ok, More, Long, Bad };
  State state = More;
  size_t end = 0, next = 0;
};

Line lineAt(std::string_view data, size_t at, size_t maxLength) {
  Line line;
  const size_t lf = data.find('\n', at);
  const size_t stop = lf == std::string_view::npos ? data.size() : lf;
  for (size_t i = at; i < stop; ++i)
    if (data[i] == '\r' && i + 1 != stop) {
      line.state = Line::Bad;
      return line;
    }
  line.end = (lf != std::string_view::npos && stop > at && data[stop - 1] == '\r') ? stop - 1 : stop;
  if (line.end - at > maxLength) {
    line.state = Line::Long;
  } else if (lf != std::string_view::npos) {
    line.state = Line::Ok;
    line.next = lf + 1;
  }
  return line;
}

}  // namespace

const std::string* Request::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (key == name) return &value;
  return nullptr;
}

std::string_view Request::path() const {
  const std::string_view t(target);
  return t.substr(0, std::min(t.find('?'), t.size()));
}

Parse parseRequest(std::string_view data, const Limits& limits, Request& out) {
  out = Request();
  size_t at = 0;
  // Empty lines before the request line are ignored (RFC 9112 2.2), a few of them.
  for (int i = 0; i < 4 && at < data.size() && (data[at] == '\n' || data[at] == '\r'); ++i) {
    if (data[at] == '\r') {
      if (at + 1 >= data.size()) return {};
      if (data[at + 1] != '\n') return failure(400, "a carriage return without a line feed");
      at += 2;
    } else {
      at += 1;
    }
  }

  // The request line: method SP target SP HTTP/1.x
  const Line first = lineAt(data, at, limits.requestLine);
  if (first.state == Line::Bad) return failure(400, "a carriage return without a line feed in the request line");
  if (first.state == Line::Long)
    return failure(414, "the request line is longer than " + std::to_string(limits.requestLine) + " bytes");
  if (first.state == Line::More) return {};
  const std::string_view requestLine = data.substr(at, first.end - at);
  const size_t sp1 = requestLine.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : requestLine.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || requestLine.find(' ', sp2 + 1) != std::string_view::npos)
    return failure(400, "the request line is not 'METHOD TARGET HTTP/1.1'");
  const std::string_view method = requestLine.substr(0, sp1);
  std::string_view target = requestLine.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = requestLine.substr(sp2 + 1);
  if (!isToken(method)) return failure(400, "the method is not a token");
  if (target.empty() || !isTargetChars(target)) return failure(400, "the request target is empty or has spaces or controls");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9')
    return failure(400, "the protocol is not HTTP/1.x");
  if (version[5] != '1') return failure(505, "only HTTP/1.0 and HTTP/1.1 are served");
  out.minor = version[7] - '0';
  if (target.substr(0, 7) == "http://" || target.substr(0, 8) == "https://") {
    // Absolute form: the path after the authority.
    const size_t slash = target.find('/', target.find("//") + 2);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  if (target.front() != '/' && !(target == "*" && method == "OPTIONS"))
    return failure(400, "the request target must start with '/'");
  out.method = std::string(method);
  out.target = std::string(target);
  at = first.next;

  // Header lines up to an empty line.
  const size_t headStart = at;
  for (;;) {
    const size_t budget = limits.headerBytes - std::min(limits.headerBytes, at - headStart);
    const Line line = lineAt(data, at, budget);
    if (line.state == Line::Bad) return failure(400, "a carriage return without a line feed in the headers");
    if (line.state == Line::Long)
      return failure(431, "the headers are longer than " + std::to_string(limits.headerBytes) + " bytes");
    if (line.state == Line::More) return {};
    const std::string_view text = data.substr(at, line.end - at);
    at = line.next;
    if (text.empty()) break;
    if (text.front() == ' ' || text.front() == '\t') return failure(400, "folded header lines are not accepted");
    if (out.headers.size() >= limits.headerCount)
      return failure(431, "more than " + std::to_string(limits.headerCount) + " headers");
    const size_t colon = text.find(':');
    if (colon == std::string_view::npos) return failure(400, "a header line has no ':'");
    const std::string_view name = text.substr(0, colon);
    if (!isToken(name)) return failure(400, "a header name is not a token (no spaces before ':')");
    const std::string_view value = trim(text.substr(colon + 1));
    if (!isFieldValue(value)) return failure(400, "the header " + std::string(name) + " has control characters");
    out.headers.emplace_back(lower(name), std::string(value));
  }

  // The headers that shape the message.
  bool hasLength = false;
  uint64_t length = 0;
  int hosts = 0;
  bool close = false, keepAlive = false;
  for (const auto& [name, value] : out.headers) {
    if (name == "host") {
      ++hosts;
    } else if (name == "transfer-encoding") {
      return failure(411, "Transfer-Encoding bodies are not accepted: send Content-Length");
    } else if (name == "content-length") {
      for (std::string_view item : listOf(value)) {
        if (item.size() > 18 || !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; }))
          return failure(400, "Content-Length '" + std::string(item.substr(0, 40)) + "' is not a number");
        uint64_t v = 0;
        for (char c : item) v = v * 10 + static_cast<uint64_t>(c - '0');
        if (hasLength && v != length) return failure(400, "Content-Length is given twice with different values");
        hasLength = true;
        length = v;
      }
      if (value.empty()) return failure(400, "Content-Length is empty");
    } else if (name == "connection") {
      for (std::string_view item : listOf(value)) {
        const std::string option = lower(item);
        if (option == "close") close = true;
        if (option == "keep-alive") keepAlive = true;
      }
    } else if (name == "expect") {
      if (lower(value) != "100-continue") return failure(417, "Expect '" + value.substr(0, 40) + "' is not 100-continue");
      out.expectContinue = true;
    }
  }
  if (out.minor == 1 && hosts != 1) return failure(400, "an HTTP/1.1 request needs one Host header");
  if (hosts > 1) return failure(400, "more than one Host header");
  out.keepAlive = !close && (out.minor == 1 || keepAlive);
  if (length > limits.body)
    return failure(413, "the body's " + std::to_string(length) + " bytes exceed the limit of " +
                            std::to_string(limits.body));

  Parse p;
  p.headersDone = true;
  p.needed = at + length;
  if (data.size() - at < length) return p;  // the body is still coming
  if (length == 0) out.expectContinue = false;
  out.body = std::string(data.substr(at, length));
  p.kind = Parse::Complete;
  p.consumed = at + length;
  return p;
}

const char* reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

namespace {

thread_local std::vector<std::pair<std::string, std::string>> threadHeaders;

std::string head(int status, std::string_view contentType, bool keepAlive) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  out += "Server: gizml\r\n";
  if (!contentType.empty()) out += "Content-Type: " + std::string(contentType) + "\r\n";
  out += keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : threadHeaders) out += name + ": " + value + "\r\n";
  return out;
}

}  // namespace

ThreadHeaders::ThreadHeaders(std::vector<std::pair<std::string, std::string>> headers)
    : previous_(std::exchange(threadHeaders, std::move(headers))) {}

ThreadHeaders::~ThreadHeaders() { threadHeaders = std::move(previous_); }

std::string response(int status, std::string_view contentType, std::string_view body, bool keepAlive,
                     const std::vector<std::pair<std::string, std::string>>& extraHeaders) {
  std::string out = head(status, contentType, keepAlive);
  for (const auto& [name, value] : extraHeaders) out += name + ": " + value + "\r\n";
  if (status != 204) out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "\r\n";
  out += body;
  return out;
}

std::string streamHead(int status, std::string_view contentType, bool keepAlive, bool chunked) {
  return head(status, contentType, keepAlive && chunked) + "Cache-Control: no-cache\r\n" +
         (chunked ? "Transfer-Encoding: chunked\r\n\r\n" : "\r\n");
}

std::string chunk(std::string_view data) {
  if (data.empty()) return "";
  static const char* hex = "0123456789abcdef";
  std::string size;
  for (size_t n = data.size(); n > 0; n /= 16) size.insert(size.begin(), hex[n % 16]);
  return size + "\r\n" + std::string(data) + "\r\n";
}

std::string lastChunk() { return "0\r\n\r\n"; }

}  // namespace gizml::ai::http
