// A completion's response, whole or streamed (reply.h).
#include "ai/reply.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>

#include "ai/error_response.h"
#include "ai/http.h"
#include "ai/transport.h"
#include "core/json_text.h"

namespace gizml::ai {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;


class WholeReply : public Reply {
 public:
  WholeReply(int fd, bool keepAlive) : fd_(fd), keepAlive_(keepAlive) {}
  bool send(Completion&) override { return true; }  // nothing until the end
  bool end(Completion& completion) override {
    return sendWhole(fd_, http::response(200, "application/json", jsonText(completion.whole()), keepAlive_));
  }
  bool fail(int status, const std::string& error) override {
    // A server error's answer closes the connection (it says so).
    return sendWhole(fd_, errorResponse(status, error, keepAlive_ && status < 500)) && status < 500;
  }

 private:
  int fd_;
  bool keepAlive_;
};

class StreamedReply : public Reply {
 public:
  StreamedReply(int fd, bool keepAlive, bool chunked, bool includeUsage)
      : fd_(fd), keepAlive_(keepAlive), chunked_(chunked), includeUsage_(includeUsage) {}

  bool send(Completion& completion) override {
    if (!headSent_) {
      if (!sendAll(fd_, http::streamHead(200, "text/event-stream", keepAlive_, chunked_))) return false;
      headSent_ = true;
    }
    for (Json& choice : completion.chunks())
      if (!event(completion.framed(Json::array({std::move(choice)})))) return false;
    return true;
  }
  bool end(Completion& completion) override {
    bool ok = true;
    if (includeUsage_) {
      Json last = completion.framed(Json::array());
      last["usage"] = completion.usage();
      ok = event(last);
    }
    return ok && write("data: [DONE]\n\n") && endBody() && chunked_;
  }
  bool fail(int status, const std::string& error) override {
    if (!headSent_) return sendWhole(fd_, errorResponse(status, error, keepAlive_ && status < 500)) && status < 500;
    event(errorBody(error, "server_error", "", ""));
    write("data: [DONE]\n\n");
    endBody();
    return false;
  }

 private:
  bool write(std::string_view data) const { return sendAll(fd_, chunked_ ? http::chunk(data) : std::string(data)); }
  bool endBody() const { return !chunked_ || sendAll(fd_, http::lastChunk()); }
  bool event(const Json& j) const { return write("data: " + jsonText(j) + "\n\n"); }
  int fd_;
  bool keepAlive_, chunked_, includeUsage_;
  bool headSent_ = false;
};

}  // namespace

// A client that reads a byte now and then cannot hold the write (and its thread) for ever.
bool sendAll(int fd, std::string_view data) {
  timeval limit{};
  socklen_t size = sizeof limit;
  const bool timed = ::getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, &size) == 0 && (limit.tv_sec > 0 || limit.tv_usec > 0);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(limit.tv_sec) + std::chrono::microseconds(limit.tv_usec);
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
    if (timed && !data.empty() && Clock::now() >= deadline) return false;
  }
  return true;
}

std::unique_ptr<Reply> streamedReply(int fd, bool keepAlive, bool http1_1, bool includeUsage) {
  return std::make_unique<StreamedReply>(fd, keepAlive, http1_1, includeUsage);
}

std::unique_ptr<Reply> wholeReply(int fd, bool keepAlive) { return std::make_unique<WholeReply>(fd, keepAlive); }

}  // namespace gizml::ai
