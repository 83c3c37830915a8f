// ai::serve on a Listener: a socket the test opened itself and hands over (as socket activation
// does), the host:port form, and every bad host, port and descriptor refused with gizml::Error.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/un.h>

#include <cstring>

#include "serve_fixture.h"

using namespace gizml;
using namespace gizml::ai::servetest;
using nlohmann::json;

namespace {

// A TCP socket on 127.0.0.1's ephemeral port; listening unless told not to.
int openSocket(int type = SOCK_STREAM, bool listening = true) {
  const int fd = ::socket(AF_INET, type, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
  if (listening) {
    EXPECT_EQ(::listen(fd, 16), 0) << std::strerror(errno);
  }
  return fd;
}

int portOf(int fd) {
  sockaddr_in address{};
  socklen_t size = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  return ntohs(address.sin_port);
}

bool isOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

// The Error's message (or "" when none was thrown).
template <class F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<ai::Served> engines(const TestModel& test) {
  std::vector<ai::Served> served;
  served.push_back(test.served("fake", 2, 256));
  return served;
}

// The server answers on port: the model list and a chat completion of the script.
void expectAnswers(TestModel& test, int port) {
  const Response models = call(port, "GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.json()["data"][0]["id"], "fake");
  test.setScript("Hello from the socket.");
  const Response chat = post(port, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.json()["choices"][0]["message"]["content"], "Hello from the socket.");
}

}  // namespace

TEST(Listener, ServesOnASocketItWasHanded) {
  TestModel test;
  const int fd = openSocket();
  const int port = portOf(fd);
  {
    ai::Listener listener = ai::Listener::adopt(fd);
    EXPECT_EQ(listener.fd(), fd);
    EXPECT_EQ(listener.port(), port);
    EXPECT_EQ(listener.host(), "127.0.0.1");
    ai::Server server = ai::serve(engines(test), std::move(listener));
    EXPECT_EQ(server.port(), port);
    EXPECT_EQ(server.url(), "http://127.0.0.1:" + std::to_string(port));
    expectAnswers(test, port);
  }
  // The server owned the socket: it closed it.
  EXPECT_EQ(connectTo(port), -1);
}

TEST(Listener, BindsAHostAndPort) {
  TestModel test;
  ai::Listener listener("127.0.0.1", 0);
  ASSERT_GT(listener.port(), 0);
  const int port = listener.port();
  // The port is taken while the listener holds it.
  EXPECT_NE(errorOf([&] { ai::Listener taken("127.0.0.1", port); }).find("serve: cannot listen on 127.0.0.1:" + std::to_string(port)),
            std::string::npos);
  ai::Server server = ai::serve(engines(test), std::move(listener));
  EXPECT_EQ(server.port(), port);
  expectAnswers(test, port);
  // Server(models, options) is the same on Listener(options.host, options.port).
  ai::ServeOptions options;
  options.port = 0;
  ai::Server other(engines(test), options);
  EXPECT_NE(other.port(), port);
  expectAnswers(test, other.port());
}

TEST(Listener, BadHostsAndPortsAreErrors) {
  for (int port : {-1, 65536, 1 << 30})
    EXPECT_NE(errorOf([&] { ai::Listener bad("127.0.0.1", port); }).find("is not in [0, 65535]"), std::string::npos) << port;
  EXPECT_NE(errorOf([] { ai::Listener bad("", 0); }).find("serve: cannot resolve host ''"), std::string::npos);
  // An address of no interface here (TEST-NET-1, RFC 5737).
  EXPECT_NE(errorOf([] { ai::Listener bad("192.0.2.1", 0); }).find("serve: cannot listen on 192.0.2.1:0"), std::string::npos);
  ai::ServeOptions options;
  options.port = 70000;
  TestModel test;
  EXPECT_NE(errorOf([&] { ai::Server refused(engines(test), options); }).find("is not in [0, 65535]"), std::string::npos);
}

TEST(Listener, BadDescriptorsAreErrorsAndStayTheCallers) {
  EXPECT_NE(errorOf([] { ai::Listener::adopt(-1); }).find("file descriptor -1 is not open"), std::string::npos);
  const int file = ::open("/dev/null", O_RDONLY);
  const int udp = openSocket(SOCK_DGRAM, false);
  const int idle = openSocket(SOCK_STREAM, false);
  const int local = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un path{};
  path.sun_family = AF_UNIX;  // an abstract address: no file to clean up
  std::snprintf(path.sun_path + 1, sizeof path.sun_path - 1, "gizml-listener-test-%d", ::getpid());
  ASSERT_EQ(::bind(local, reinterpret_cast<sockaddr*>(&path), sizeof path), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(local, 4), 0);
  const std::vector<std::pair<int, std::string>> bad = {{file, "is not a socket"},
                                                        {udp, "is not a stream (TCP) socket"},
                                                        {idle, "is not listening"},
                                                        {local, "is not an IPv4 or IPv6 socket"}};
  for (const auto& [fd, reason] : bad) {
    const std::string message = errorOf([fd = fd] { ai::Listener::adopt(fd); });
    EXPECT_NE(message.find("serve: file descriptor " + std::to_string(fd) + " " + reason), std::string::npos) << message;
    EXPECT_TRUE(isOpen(fd)) << reason;
    ::close(fd);
  }
  EXPECT_NE(errorOf([fd = file] { ai::Listener::adopt(fd); }).find("is not open"), std::string::npos);
  // A server that refuses its engines closes the listener it was given.
  const int fd = openSocket();
  const int port = portOf(fd);
  EXPECT_NE(errorOf([&] { ai::serve({}, ai::Listener::adopt(fd)); }).find("serve: no models to serve"), std::string::npos);
  EXPECT_EQ(connectTo(port), -1);
}
