// Listener: the server's listening TCP socket, bound here from a host and port or adopted from
// a caller that bound it (socket activation), each checked before the server takes it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gizml/ai.h>
#include <gizml/error.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace gizml::ai {
namespace {

// A bound socket's address: family 0 when it has none of IPv4 or IPv6.
struct Bound {
  int family = 0;
  int port = 0;
  std::string host;  // numeric
};

Bound boundAddress(int fd) {
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  Bound out;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size) != 0) return out;
  char text[INET6_ADDRSTRLEN] = "";
  if (bound.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(bound);
    ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    out = {AF_INET, ntohs(a.sin_port), text};
  } else if (bound.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(bound);
    ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    out = {AF_INET6, ntohs(a.sin6_port), text};
  }
  return out;
}

int socketOption(int fd, int option, int& value) {
  socklen_t size = sizeof value;
  return ::getsockopt(fd, SOL_SOCKET, option, &value, &size);
}

}  // namespace

Listener::Listener(int fd, std::string host) : fd_(fd), host_(std::move(host)), port_(boundAddress(fd).port) {}

Listener::Listener(const std::string& host, int port) {
  check(port >= 0 && port <= 65535, "serve: port " + std::to_string(port) + " is not in [0, 65535]");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  check(rc == 0, "serve: cannot resolve host '" + host + "': " + ::gai_strerror(rc));
  std::string failure = "no address";
  int listening = -1;
  for (addrinfo* a = found; a && listening < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // The kernel caps the backlog at net.core.somaxconn; a burst of connects waits there.
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 4096) == 0) {
      listening = fd;
    } else {
      failure = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  check(listening >= 0, "serve: cannot listen on " + host + ":" + service + ": " + failure);
  fd_ = listening;
  host_ = host;
  port_ = boundAddress(fd_).port;
}

Listener Listener::adopt(int fd) {
  const std::string what = "serve: file descriptor " + std::to_string(fd);
  check(fd >= 0 && ::fcntl(fd, F_GETFD) != -1, what + " is not open");
  int type = 0, accepting = 0;
  if (socketOption(fd, SO_TYPE, type) != 0)
    throw Error(what + " is not a socket: " + std::strerror(errno));
  check(type == SOCK_STREAM, what + " is not a stream (TCP) socket");
  const Bound bound = boundAddress(fd);
  check(bound.family == AF_INET || bound.family == AF_INET6, what + " is not an IPv4 or IPv6 socket");
  check(socketOption(fd, SO_ACCEPTCONN, accepting) == 0 && accepting == 1, what + " is not listening (listen() it first)");
  // The server's loop accepts without blocking; its children need not inherit the socket.
  const int flags = ::fcntl(fd, F_GETFL);
  check(flags != -1 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 && ::fcntl(fd, F_SETFD, FD_CLOEXEC) == 0,
        what + ": cannot make it non-blocking: " + std::strerror(errno));
  return Listener(fd, bound.host);
}

Listener::Listener(Listener&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), host_(std::move(other.host_)), port_(other.port_) {}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    host_ = std::move(other.host_);
    port_ = other.port_;
  }
  return *this;
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace gizml::ai
