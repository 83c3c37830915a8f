#pragma once
// How a completion goes on the wire: one JSON response at its end, or Server-Sent Events as its
// choices come (chunked on HTTP/1.1, raw on 1.0). Each returns whether the connection stays
// usable for the next request.
#include <memory>
#include <string>
#include <string_view>

#include "ai/completion.h"

namespace gizml::ai {

/// Sends all of data; the socket's send timeout bounds each send and the whole write.
bool sendAll(int fd, std::string_view data);

class Reply {
 public:
  virtual ~Reply() = default;
  /// What the last take gave; false when the client cannot be written to.
  virtual bool send(Completion& completion) = 0;
  /// The completion finished.
  virtual bool end(Completion& completion) = 0;
  /// The request failed (status 400/500/503 and why).
  virtual bool fail(int status, const std::string& error) = 0;
};

/// http1_1: the request's HTTP minor version is 1 (the body is chunked; on 1.0 the connection
/// closes after it).
std::unique_ptr<Reply> streamedReply(int fd, bool keepAlive, bool http1_1, bool includeUsage);
std::unique_ptr<Reply> wholeReply(int fd, bool keepAlive);

}  // namespace gizml::ai
