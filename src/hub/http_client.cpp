#include "hub/http_client.h"

#include <curl/curl.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

namespace fs = std::filesystem;

namespace gizml::hub {

namespace {

constexpr size_t kMaxBody = size_t(64) << 20;

void initializeCurl() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw Error("libcurl: global initialization failed");
  });
}

struct Easy {
  Easy() : handle(curl_easy_init()) {
    if (!handle) throw Error("libcurl: cannot make a handle");
  }
  ~Easy() {
    curl_easy_cleanup(handle);
    curl_slist_free_all(headers);
  }
  Easy(const Easy&) = delete;
  Easy& operator=(const Easy&) = delete;
  CURL* handle;
  curl_slist* headers = nullptr;
};

// What one transfer brought: curl's code, the final status, the body of an error answer.
struct Outcome {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string error;  // curl's words for code
  std::string body;   // of an answer that is no success (a few KiB), or of get()
  std::string errorCode;
};

// The hub's X-Error-Code of the last answer (a redirect's headers come first: each status line starts over).
size_t headerLine(char* data, size_t size, size_t count, void* user) {
  auto* code = static_cast<std::string*>(user);
  const std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) code->clear();
  const std::string name = "x-error-code:";
  if (line.size() > name.size() && strncasecmp(line.c_str(), name.c_str(), name.size()) == 0) {
    std::string value = line.substr(name.size());
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
    *code = value.substr(std::min(value.find_first_not_of(' '), value.size()));
  }
  return size * count;
}

// What the hub says beside a status, for the error message.
std::string shortBody(const std::string& body) {
  std::string text = body.substr(0, 300);
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text.empty() ? "" : ": " + text;
}

bool retryable(const Outcome& o) {
  if (o.code == CURLE_OK) return o.status >= 500 || o.status == 429;
  switch (o.code) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

void setCommon(Easy& e, const std::string& url, const std::string& token, char* errorBuffer) {
  curl_easy_setopt(e.handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e.handle, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e.handle, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(e.handle, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e.handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e.handle, CURLOPT_CONNECTTIMEOUT, 10L);
  // A transfer that brings less than 1 byte/s for 30 s has stalled: retried, resumed.
  curl_easy_setopt(e.handle, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(e.handle, CURLOPT_LOW_SPEED_TIME, 30L);
  curl_easy_setopt(e.handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e.handle, CURLOPT_USERAGENT, "gizml/0.1.0");
  curl_easy_setopt(e.handle, CURLOPT_ERRORBUFFER, errorBuffer);
  if (!token.empty()) e.headers = curl_slist_append(e.headers, ("Authorization: Bearer " + token).c_str());
}

long statusOf(CURL* handle) {
  long status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

Outcome perform(Easy& e, const char* errorBuffer) {
  curl_easy_setopt(e.handle, CURLOPT_HTTPHEADER, e.headers);
  Outcome o;
  curl_easy_setopt(e.handle, CURLOPT_HEADERFUNCTION, headerLine);
  curl_easy_setopt(e.handle, CURLOPT_HEADERDATA, &o.errorCode);
  o.code = curl_easy_perform(e.handle);
  o.status = statusOf(e.handle);
  o.error = errorBuffer[0] ? errorBuffer : curl_easy_strerror(o.code);
  return o;
}

void backoff(int attempt) {
  std::this_thread::sleep_for(std::chrono::milliseconds(HttpClient::kFirstBackoffMs << attempt));
}

[[noreturn]] void fail(const std::string& url, const Outcome& o) {
  if (o.code != CURLE_OK) throw UnreachableError(url + ": " + o.error);
  throw HttpError(url + ": HTTP " + std::to_string(o.status) + shortBody(o.body), o.status, o.errorCode);
}

// get(): the body, bounded.
size_t collect(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  if (body->size() + size * count > kMaxBody) return 0;  // curl stops with CURLE_WRITE_ERROR
  body->append(data, size * count);
  return size * count;
}

// download(): the body goes to the file only from a 200 (which starts it over) or a 206.
struct Sink {
  CURL* handle;
  std::FILE* file;
  int64_t bytes;
  const std::function<void(int64_t)>* onBytes;
  std::string errorBody;
  bool started = false;
};

size_t toFile(char* data, size_t size, size_t count, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t n = size * count;
  const long status = statusOf(s->handle);
  if (status != 200 && status != 206) {
    if (s->errorBody.size() < 4096) s->errorBody.append(data, std::min<size_t>(n, 4096));
    return n;
  }
  if (!s->started) {
    s->started = true;
    // A server that ignores Range sends the whole body again.
    if (status == 200 && s->bytes > 0) {
      if (std::fflush(s->file) != 0 || ftruncate(fileno(s->file), 0) != 0 || std::fseek(s->file, 0, SEEK_SET) != 0) return 0;
      s->bytes = 0;
    }
  }
  if (std::fwrite(data, 1, n, s->file) != n) return 0;
  s->bytes += static_cast<int64_t>(n);
  (*s->onBytes)(s->bytes);
  return n;
}

}  // namespace

HttpClient::HttpClient(std::string token) : token_(std::move(token)) { initializeCurl(); }

std::string HttpClient::get(const std::string& url) const {
  Outcome o;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (attempt > 0) backoff(attempt - 1);
    Easy e;
    char errorBuffer[CURL_ERROR_SIZE] = {};
    setCommon(e, url, token_, errorBuffer);
    e.headers = curl_slist_append(e.headers, "Accept: application/json");
    std::string body;
    curl_easy_setopt(e.handle, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e.handle, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(e.handle, CURLOPT_TIMEOUT, 120L);
    o = perform(e, errorBuffer);
    o.body = std::move(body);
    if (o.code == CURLE_OK && o.status >= 200 && o.status < 300) return o.body;
    if (o.code == CURLE_WRITE_ERROR) throw Error(url + ": the answer is larger than 64 MiB");
    if (!retryable(o)) break;
  }
  fail(url, o);
}

void HttpClient::download(const std::string& url, const fs::path& file, const std::function<void(int64_t)>& onBytes) const {
  Outcome o;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (attempt > 0) backoff(attempt - 1);
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(file.c_str(), "ab"), std::fclose);
    if (!out) throw Error(file.string() + ": cannot write");
    const int64_t have = static_cast<int64_t>(fs::file_size(file));
    Easy e;
    char errorBuffer[CURL_ERROR_SIZE] = {};
    setCommon(e, url, token_, errorBuffer);
    Sink sink{e.handle, out.get(), have, &onBytes, {}, false};
    const std::string range = std::to_string(sink.bytes) + "-";
    if (sink.bytes > 0) curl_easy_setopt(e.handle, CURLOPT_RANGE, range.c_str());
    curl_easy_setopt(e.handle, CURLOPT_WRITEFUNCTION, toFile);
    curl_easy_setopt(e.handle, CURLOPT_WRITEDATA, &sink);
    o = perform(e, errorBuffer);
    o.body = sink.errorBody;
    if (std::fflush(out.get()) != 0) throw Error(file.string() + ": cannot write (disk full?)");
    if (o.code == CURLE_WRITE_ERROR) throw Error(file.string() + ": cannot write (disk full?)");
    if (o.code == CURLE_OK && (o.status == 200 || o.status == 206)) return;
    if (o.status == 416 && sink.bytes > 0) {  // more than the file has: start it over
      out.reset();
      fs::resize_file(file, 0);
      continue;
    }
    if (!retryable(o)) break;
  }
  fail(url, o);
}

}  // namespace gizml::hub
