#pragma once
// The server's connections: one event loop (epoll) accepts them and reads every request's head
// and body with no thread each, under deadlines and caps, then hands each complete request to a
// handler on a thread of its own, which writes the answer (blocking, streamed or whole) and gives
// the connection back for its next request. Slow clients cost a socket and a buffer, never a thread.
#include <gizml/ai.h>

#include <functional>
#include <memory>
#include <string>

#include "ai/access.h"
#include "ai/http.h"

namespace gizml::ai {

struct TransportOptions {
  http::Limits limits;
  int headTimeoutMs = 5000;      // a request's head must arrive within this of its first byte
                                 // (a new connection's first byte within this of its accept)
  int bodyTimeoutMs = 10000;     // each read of a body must bring bytes within this
  int requestTimeoutMs = 30000;  // the whole request within this of its first byte; also how long
                                 // a write may wait for a client that does not read
  int idleTimeoutMs = 60000;     // a kept-alive connection waits this long for its next request
  int maxConnections = 4096;     // open at once; past it the longest idle one closes, else 503
  int maxPerClient = 256;        // open at once from one client address; likewise
  int retryAfterSeconds = 1;     // a 503's Retry-After
};

/// Answers one complete request on the connection's socket fd (blocking writes; the socket has a
/// send timeout). keepAlive: the answer may keep the connection. Returns false to close it anyway.
using Handler = std::function<bool(int fd, const http::Request& request, bool keepAlive)>;

/// Sends a handler's whole answer (head and body) on fd. On the thread the transport runs fd's
/// handler on, the answer is left to the transport's loop instead, which sends it once the
/// handler returns: the answer has ended when the loop sent its last byte, in the loop's order of
/// events, so a connection cap closes the connection whose answer truly ended first (a handler
/// thread could be preempted between its last byte and its report). Elsewhere it is sent at once
/// (sendAll). Returns false where the write failed.
bool sendWhole(int fd, std::string answer);

/// While it lives, sendWhole on fd from this thread appends to `answer` (the transport's handler
/// threads).
class WholeAnswerKept {
 public:
  WholeAnswerKept(int fd, std::string& answer);
  ~WholeAnswerKept();
  WholeAnswerKept(const WholeAnswerKept&) = delete;
  WholeAnswerKept& operator=(const WholeAnswerKept&) = delete;
};

class Transport {
 public:
  /// Accepts on listener and serves until stop().
  Transport(Listener listener, TransportOptions options, Access access, Handler handler);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int port() const;
  /// Stops accepting, closes the waiting connections, shuts down those being answered (their
  /// handlers see the socket closed) and joins every thread.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gizml::ai
