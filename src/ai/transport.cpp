// The event loop of transport.h: accepting on the Listener, reading requests, deadlines, caps,
// eviction.
#include "ai/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gizml/error.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ai/error_response.h"
#include "ai/reply.h"

namespace gizml::ai {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kDrainMs = 500;            // after an error answer: reading what the client still sends
constexpr int kMaxRefusedDraining = 256;  // refused connections draining at once; more close at once
constexpr size_t kReadChunk = 64 * 1024;

// Where a connection is between requests.
enum class Phase {
  Idle,      // no byte of a request yet
  Head,      // the head is arriving
  Body,      // the head is read, the body is arriving
  Handling,  // a handler thread owns the socket
  Draining,  // answered with an error and shut for writing: read until the client closes
};

struct Connection {
  int fd = -1;
  std::string client;  // the peer's address, for the per-client cap
  bool counted = true;  // false: a refused connection draining its 503
  Phase phase = Phase::Idle;
  std::string in, out;   // bytes read and not yet taken by a request; bytes the loop still has to write
  bool closing = false;  // once out is written: shut for writing, drain, close
  bool served = false;   // has answered a request (its idle wait is the keep-alive one)
  bool continued = false;  // 100 Continue sent for the request arriving
  bool processing = false;  // process() runs for it (a pipelined request waits for its loop)
  size_t needed = 0;        // Body: the bytes of the whole request, so that its head is parsed once
  Clock::time_point since;         // start of the phase (Idle, Draining) or of the request (Head, Body)
  Clock::time_point lastProgress;  // the last bytes of the body
  Clock::time_point writeSince;    // when out began to wait for the client
  bool idleListed = false;
  std::list<Connection*>::iterator idleAt;
  uint64_t answered = 0;  // when its last answer ended, in the order of all answers (Impl::answers)
  uint32_t events = 0;  // registered with epoll; 0: not registered
  std::thread handler;
};

std::string addressOf(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
  } else if (a.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof text);
  }
  std::string s = text;
  if (s.rfind("::ffff:", 0) == 0 && s.find('.') != std::string::npos) s.erase(0, 7);  // IPv4 on an IPv6 socket
  return s;
}

}  // namespace

struct Transport::Impl {
  Impl(Listener l, TransportOptions o, Access a, Handler h)
      : listener(std::move(l)), options(std::move(o)), access(std::move(a)), handler(std::move(h)) {}
  Listener listener;
  TransportOptions options;
  Access access;
  Handler handler;
  int listenFd = listener.fd(), epollFd = -1, wakeFd = -1, spareFd = -1;
  std::thread loopThread;
  std::atomic<bool> stopping{false};
  std::mutex stopMutex;
  bool stopped = false;

  // The loop thread's own.
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections;
  std::unordered_map<std::string, int> perClient;
  std::list<Connection*> idle;  // the longest idle first (served ones by when their answers ended)
  std::atomic<uint64_t> answers{0};
  int counted = 0, refusedDraining = 0;
  Clock::time_point nextDeadline = Clock::time_point::max();
  std::vector<char> scratch = std::vector<char>(kReadChunk);

  // Handlers that ended: their connection, whether it stays open, and a whole answer they left
  // for the loop to send (sendWhole).
  struct Returned {
    Connection* connection;
    bool keep;
    std::string whole;
  };
  std::mutex returnedMutex;
  std::vector<Returned> returned;

  void watchListener();
  void loop();
  void acceptAll();
  void admit(int fd, const sockaddr_storage& peer);
  void refuse(int fd, const std::string& message);
  // A 503 that closes, with Retry-After.
  std::string unavailable(const std::string& message) const {
    return errorResponse(503, message, false, "", "", {{"Retry-After", std::to_string(options.retryAfterSeconds)}});
  }
  Connection* oldestIdle(const std::string* client);
  void onEvent(Connection& c, uint32_t events);
  void readSome(Connection& c);
  void process(Connection& c);
  bool processOne(Connection& c);
  void handOff(Connection& c, http::Request request, bool keepAlive);
  void startHandler(Connection& c, http::Request request, bool keepAlive);
  void collectReturned();
  void respond(Connection& c, const std::string& bytes, bool close);
  void flush(Connection& c);
  void becomeIdle(Connection& c);
  void leaveIdle(Connection& c);
  void watch(Connection& c, uint32_t events);
  void close(Connection& c);
  Clock::time_point deadlineOf(const Connection& c) const;
  void noteDeadline(const Connection& c) { nextDeadline = std::min(nextDeadline, deadlineOf(c)); }
  void sweep();
  void shutdownAll();
  ~Impl() {
    for (int fd : {epollFd, wakeFd, spareFd})
      if (fd >= 0) ::close(fd);
  }
};

void Transport::Impl::watchListener() {
  epollFd = ::epoll_create1(EPOLL_CLOEXEC);
  wakeFd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  check(epollFd >= 0 && wakeFd >= 0, std::string("serve: epoll: ") + std::strerror(errno));
  // Kept for the moment the process runs out of descriptors: closed to accept and refuse one.
  spareFd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.ptr = &listenFd;
  ::epoll_ctl(epollFd, EPOLL_CTL_ADD, listenFd, &e);
  e.data.ptr = &wakeFd;
  ::epoll_ctl(epollFd, EPOLL_CTL_ADD, wakeFd, &e);
}

void Transport::Impl::loop() {
  std::vector<epoll_event> events(512);
  while (!stopping) {
    int timeout = 1000;
    if (nextDeadline != Clock::time_point::max()) {
      const auto left = std::chrono::duration_cast<milliseconds>(nextDeadline - Clock::now()).count() + 1;
      timeout = static_cast<int>(std::clamp<long long>(left, 0, 1000));
    }
    const int n = ::epoll_wait(epollFd, events.data(), static_cast<int>(events.size()), timeout);
    if (stopping) break;
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &listenFd) {
        acceptAll();
      } else if (tag == &wakeFd) {
        uint64_t count;
        (void)!::read(wakeFd, &count, sizeof count);
        collectReturned();
      } else if (connections.count(static_cast<Connection*>(tag))) {
        onEvent(*static_cast<Connection*>(tag), events[i].events);
      }
    }
    if (Clock::now() >= nextDeadline) sweep();
  }
  shutdownAll();
}

void Transport::Impl::acceptAll() {
  for (int accepted = 0; accepted < 256; ++accepted) {
    sockaddr_storage peer{};
    socklen_t size = sizeof peer;
    // Blocking sockets: the loop reads and writes with MSG_DONTWAIT, handlers block (with a timeout).
    const int fd = ::accept4(listenFd, reinterpret_cast<sockaddr*>(&peer), &size, SOCK_CLOEXEC);
    if (fd >= 0) {
      admit(fd, peer);
      continue;
    }
    if ((errno == EMFILE || errno == ENFILE) && spareFd >= 0) {
      // No descriptor left: free the spare to take the connection and refuse it, so that it
      // does not stay in the backlog (waking the loop again and again).
      ::close(spareFd);
      const int refused = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
      if (refused >= 0) {
        const std::string answer = unavailable("the server has no file descriptors left");
        (void)!::send(refused, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        ::close(refused);
      }
      spareFd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    return;  // EAGAIN, or an error of that one connection
  }
}

namespace {

// The whole answer a handler thread leaves for the loop (sendWhole): the connection's fd and
// where its answer goes, while the handler runs.
struct WholeAnswerPlace {
  int fd = -1;
  std::string* answer = nullptr;
};
thread_local WholeAnswerPlace wholeAnswerPlace;

// As much of bytes as fd takes without waiting (a server stopping sends no more).
void sendWhatFits(int fd, const std::string& bytes) {
  if (!bytes.empty()) (void)!::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

WholeAnswerKept::WholeAnswerKept(int fd, std::string& answer) { wholeAnswerPlace = {fd, &answer}; }
WholeAnswerKept::~WholeAnswerKept() { wholeAnswerPlace = {}; }

bool sendWhole(int fd, std::string answer) {
  if (wholeAnswerPlace.answer && wholeAnswerPlace.fd == fd) {
    *wholeAnswerPlace.answer += answer;
    return true;
  }
  return sendAll(fd, answer);
}

Connection* Transport::Impl::oldestIdle(const std::string* client) {
  // Only kept-alive connections: a new one that has not sent its request yet may be about to.
  for (Connection* c : idle)
    if (c->served && (!client || c->client == *client)) return c;
  return nullptr;
}

void Transport::Impl::admit(int fd, const sockaddr_storage& peer) {
  const std::string client = addressOf(peer);
  // At a cap, a connection that waits for nothing makes room; else the new one is refused. The
  // handlers that ended since the loop last looked are taken in first: their connections are
  // idle (their clients may have read the answer and connected again before the loop woke).
  const auto clientAtCap = [&] {
    const auto held = perClient.find(client);
    return held != perClient.end() && held->second >= options.maxPerClient;
  };
  if (clientAtCap() || counted >= options.maxConnections) collectReturned();
  const auto held = perClient.find(client);
  if (held != perClient.end() && held->second >= options.maxPerClient) {
    if (Connection* victim = oldestIdle(&client)) {
      close(*victim);
    } else {
      refuse(fd, "this client address has " + std::to_string(options.maxPerClient) +
                     " connections open (the server's --max-per-client)");
      return;
    }
  }
  if (counted >= options.maxConnections) {
    if (Connection* victim = oldestIdle(nullptr)) {
      close(*victim);
    } else {
      refuse(fd, "the server has " + std::to_string(options.maxConnections) +
                     " connections open (its --max-connections)");
      return;
    }
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // A client that stops reading fails a handler's writes after this, and its request is cancelled.
  const timeval sendTimeout{options.requestTimeoutMs / 1000, (options.requestTimeoutMs % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, sizeof sendTimeout);
  auto owned = std::make_unique<Connection>();
  Connection& c = *owned;
  c.fd = fd;
  c.client = client;
  connections.emplace(&c, std::move(owned));
  ++perClient[client];
  ++counted;
  becomeIdle(c);
  watch(c, EPOLLIN | EPOLLRDHUP);
}

void Transport::Impl::refuse(int fd, const std::string& message) {
  const std::string answer = unavailable(message);
  if (refusedDraining >= kMaxRefusedDraining) {
    (void)!::send(fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::close(fd);
    return;
  }
  auto owned = std::make_unique<Connection>();
  Connection& c = *owned;
  c.fd = fd;
  c.counted = false;
  connections.emplace(&c, std::move(owned));
  ++refusedDraining;
  watch(c, EPOLLIN | EPOLLRDHUP);
  respond(c, answer, true);
}

void Transport::Impl::watch(Connection& c, uint32_t events) {
  if (events == c.events) return;
  epoll_event e{};
  e.events = events;
  e.data.ptr = &c;
  const int op = c.events == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
  ::epoll_ctl(epollFd, op, c.fd, &e);
  c.events = events;
}

void Transport::Impl::becomeIdle(Connection& c) {
  c.phase = Phase::Idle;
  c.since = Clock::now();
  if (!c.idleListed) {
    c.idleAt = idle.insert(idle.end(), &c);
    c.idleListed = true;
    // Handler threads report their answers to the loop in any order (a busy machine may run a
    // later one's report first): a served connection goes before those answered after it, so
    // that the one answered longest ago is the first to make room (oldestIdle).
    while (c.served && c.idleAt != idle.begin()) {
      const auto before = std::prev(c.idleAt);
      if ((*before)->served && (*before)->answered <= c.answered) break;
      idle.splice(before, idle, c.idleAt);
    }
  }
  noteDeadline(c);
}

void Transport::Impl::leaveIdle(Connection& c) {
  if (c.idleListed) idle.erase(c.idleAt);
  c.idleListed = false;
}

void Transport::Impl::close(Connection& c) {
  leaveIdle(c);
  watch(c, 0);
  if (c.counted) {
    --counted;
    if (--perClient[c.client] == 0) perClient.erase(c.client);
  } else {
    --refusedDraining;
  }
  ::close(c.fd);
  connections.erase(&c);
}

Clock::time_point Transport::Impl::deadlineOf(const Connection& c) const {
  const auto after = [](Clock::time_point t, int ms) { return t + milliseconds(ms); };
  if (c.phase == Phase::Handling) return Clock::time_point::max();
  if (!c.out.empty()) return after(c.writeSince, options.requestTimeoutMs);
  switch (c.phase) {
    case Phase::Idle: return after(c.since, c.served ? options.idleTimeoutMs : options.headTimeoutMs);
    case Phase::Head: return after(c.since, std::min(options.headTimeoutMs, options.requestTimeoutMs));
    case Phase::Body:
      return std::min(after(c.lastProgress, options.bodyTimeoutMs), after(c.since, options.requestTimeoutMs));
    case Phase::Draining: return after(c.since, kDrainMs);
    case Phase::Handling: break;
  }
  return Clock::time_point::max();
}

void Transport::Impl::sweep() {
  const Clock::time_point now = Clock::now();
  nextDeadline = Clock::time_point::max();
  std::vector<Connection*> expired;
  for (auto& [key, c] : connections) {
    const Clock::time_point deadline = deadlineOf(*c);
    if (deadline <= now) expired.push_back(key);
    else nextDeadline = std::min(nextDeadline, deadline);
  }
  for (Connection* c : expired) {
    if (!c->out.empty() || c->phase == Phase::Idle || c->phase == Phase::Draining) {
      close(*c);  // a client that does not read, an idle connection, a drain done
    } else if (c->phase == Phase::Head) {
      respond(*c, errorResponse(408, "the request head did not arrive within " +
                                         std::to_string(std::min(options.headTimeoutMs, options.requestTimeoutMs)) +
                                         " ms", false), true);
    } else {
      const bool stalled = now >= c->lastProgress + milliseconds(options.bodyTimeoutMs);
      respond(*c, errorResponse(408, stalled ? "no byte of the request body arrived for " +
                                                   std::to_string(options.bodyTimeoutMs) + " ms"
                                             : "the request did not arrive within " +
                                                   std::to_string(options.requestTimeoutMs) + " ms of its first byte",
                                false), true);
    }
  }
}

void Transport::Impl::onEvent(Connection& c, uint32_t events) {
  if (!c.out.empty() && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
    flush(c);  // on an error the send fails and closes it
    if (!connections.count(&c) || c.phase == Phase::Handling) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) readSome(c);
}

void Transport::Impl::readSome(Connection& c) {
  // While an answer waits for the client to read it, its next requests wait in the socket: a
  // client that sends and never reads cannot make the loop buffer without end.
  if (!c.out.empty()) return;
  const ssize_t n = ::recv(c.fd, scratch.data(), scratch.size(), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    close(c);  // the client left (nothing to answer: a request still arriving cannot be served)
    return;
  }
  if (c.phase == Phase::Draining) return;
  if (c.phase == Phase::Idle) {
    leaveIdle(c);
    c.phase = Phase::Head;
    c.since = Clock::now();
  }
  c.in.append(scratch.data(), static_cast<size_t>(n));
  process(c);
}

void Transport::Impl::process(Connection& c) {
  // One request after another in a loop, not by recursion through respond() and flush(): a
  // client may pipeline thousands of requests the loop answers itself (preflights, 401s).
  if (c.processing) return;  // the loop below takes the next request
  c.processing = true;
  Connection* const self = &c;
  while (c.out.empty() && !c.in.empty() && c.phase != Phase::Handling && c.phase != Phase::Draining) {
    const bool answered = processOne(c);
    if (!connections.count(self)) return;  // closed (no connection is made meanwhile)
    if (!answered) break;  // waits for bytes, handed to a handler, or refused
  }
  c.processing = false;
}

// Takes the request at the start of c.in; true when the loop answered it itself (the next may follow).
bool Transport::Impl::processOne(Connection& c) {
  if (c.phase == Phase::Idle) {
    leaveIdle(c);
    c.phase = Phase::Head;
    c.since = Clock::now();
  }
  if (c.phase == Phase::Body && c.in.size() < c.needed) {
    // More of the body (not the head again: a body a byte at a time costs no parse each).
    c.lastProgress = Clock::now();
    noteDeadline(c);
    return false;
  }
  http::Request request;
  const http::Parse parse = http::parseRequest(c.in, options.limits, request);
  if (parse.kind == http::Parse::Error) {
    respond(c, errorResponse(parse.status, parse.message, false), true);
    return false;
  }
  if (parse.kind == http::Parse::Incomplete) {
    if (parse.headersDone) {
      c.phase = Phase::Body;
      c.needed = parse.needed;
      c.lastProgress = Clock::now();
      noteDeadline(c);
      if (request.expectContinue && !c.continued) {
        c.continued = true;
        respond(c, "HTTP/1.1 100 Continue\r\n\r\n", false);
        return false;
      }
    }
    noteDeadline(c);
    return false;
  }
  c.in.erase(0, parse.consumed);
  // What follows is the next request's head: it starts now, when the loop comes to it.
  c.phase = Phase::Head;
  c.since = Clock::now();
  c.needed = 0;
  const bool keepAlive = request.keepAlive && !stopping;
  if (std::optional<std::string> answer = access.answer(request, keepAlive)) {
    c.continued = false;
    c.served = true;
    respond(c, *answer, !keepAlive);
    return true;
  }
  handOff(c, std::move(request), keepAlive);
  return false;
}

void Transport::Impl::respond(Connection& c, const std::string& bytes, bool close) {
  if (c.out.empty()) c.writeSince = Clock::now();
  c.out += bytes;
  c.closing = c.closing || close;
  flush(c);
}

void Transport::Impl::flush(Connection& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      watch(c, EPOLLOUT);  // not reading meanwhile (readSome); a reset still wakes it (EPOLLERR)
      noteDeadline(c);
      return;
    }
    close(c);
    return;
  }
  watch(c, EPOLLIN | EPOLLRDHUP);
  if (c.closing) {
    // Shut for writing, then read what the client still sends until it closes, so that the
    // close does not reset the connection before the client has read the answer.
    ::shutdown(c.fd, SHUT_WR);
    leaveIdle(c);
    c.in.clear();
    c.phase = Phase::Draining;
    c.since = Clock::now();
    noteDeadline(c);
    return;
  }
  if (c.in.empty() && c.phase != Phase::Body) {
    c.answered = ++answers;
    becomeIdle(c);
  } else {
    // A pipelined request's head starts now that the answer before it has gone out.
    if (c.phase == Phase::Head) c.since = Clock::now();
    process(c);  // a pipelined request, or the body after 100 Continue
  }
}

void Transport::Impl::handOff(Connection& c, http::Request request, bool keepAlive) {
  leaveIdle(c);
  watch(c, 0);  // the handler alone reads the socket (it watches for the client leaving)
  c.phase = Phase::Handling;
  try {
    startHandler(c, std::move(request), keepAlive);
  } catch (const std::system_error&) {
    // No thread to be had (the process's thread or memory limit): the client may come back.
    c.phase = Phase::Head;
    watch(c, EPOLLIN | EPOLLRDHUP);
    respond(c, unavailable("the server cannot start a thread for the request now"), true);
  }
}

void Transport::Impl::startHandler(Connection& c, http::Request request, bool keepAlive) {
  Connection* raw = &c;
  c.handler = std::thread([this, raw, keepAlive, request = std::move(request)] {
    bool keep = false;
    std::string whole;
    {
      const http::ThreadHeaders cors(access.corsHeaders(request));
      const WholeAnswerKept kept(raw->fd, whole);
      keep = handler(raw->fd, request, keepAlive) && keepAlive;
    }
    raw->answered = ++answers;  // (the loop reads it after the lock below)
    {
      std::lock_guard lock(returnedMutex);
      returned.push_back({raw, keep, std::move(whole)});
    }
    const uint64_t one = 1;
    (void)!::write(wakeFd, &one, sizeof one);
  });
}

void Transport::Impl::collectReturned() {
  std::vector<Returned> done;
  {
    std::lock_guard lock(returnedMutex);
    done.swap(returned);
  }
  for (Returned& r : done) {
    Connection* c = r.connection;
    c->handler.join();
    if (stopping || (!r.keep && r.whole.empty())) {
      sendWhatFits(c->fd, r.whole);
      ::shutdown(c->fd, SHUT_RDWR);
      close(*c);
      continue;
    }
    c->served = true;
    c->continued = false;
    watch(*c, EPOLLIN | EPOLLRDHUP);
    if (!r.whole.empty()) {
      // The answer goes out from here; when its last byte has, it has ended (flush) and what
      // follows is the next request's head.
      c->phase = Phase::Head;
      c->since = Clock::now();
      respond(*c, r.whole, !r.keep);
    } else if (c->in.empty()) {
      becomeIdle(*c);
    } else {
      c->phase = Phase::Head;  // a pipelined request read ahead
      c->since = Clock::now();
      process(*c);
    }
  }
}

void Transport::Impl::shutdownAll() {
  if (listenFd >= 0) ::close(listenFd);
  listenFd = -1;
  {
    // Whole answers of handlers that ended since the loop last looked: what the sockets take now.
    std::lock_guard lock(returnedMutex);
    for (const Returned& r : returned) sendWhatFits(r.connection->fd, r.whole);
    returned.clear();
  }
  std::vector<Connection*> waiting;
  for (auto& [key, c] : connections)
    if (c->phase == Phase::Handling) ::shutdown(c->fd, SHUT_RDWR);
    else waiting.push_back(key);
  for (Connection* c : waiting) close(*c);
  // The handlers see their sockets shut and end; only then are the descriptors closed, so that a
  // handler never writes to a number reused by another connection.
  for (auto& [key, c] : connections)
    if (c->handler.joinable()) c->handler.join();
  for (auto& [key, c] : connections) ::close(c->fd);
  connections.clear();
}

Transport::Transport(Listener listener, TransportOptions options, Access access, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(listener), std::move(options), std::move(access), std::move(handler))) {
  Impl& m = *impl_;
  check(m.options.headTimeoutMs > 0 && m.options.bodyTimeoutMs > 0 && m.options.requestTimeoutMs > 0 &&
            m.options.idleTimeoutMs > 0,
        "serve: the timeouts must be positive");
  check(m.options.maxConnections > 0 && m.options.maxPerClient > 0, "serve: the connection caps must be positive");
  m.watchListener();
  m.loopThread = std::thread([&m] { m.loop(); });
}

Transport::~Transport() { stop(); }

int Transport::port() const { return impl_->listener.port(); }

void Transport::stop() {
  Impl& m = *impl_;
  std::lock_guard lock(m.stopMutex);
  if (m.stopped) return;
  m.stopped = true;
  m.stopping = true;
  const uint64_t one = 1;
  (void)!::write(m.wakeFd, &one, sizeof one);
  if (m.loopThread.joinable()) m.loopThread.join();
}

}  // namespace gizml::ai
