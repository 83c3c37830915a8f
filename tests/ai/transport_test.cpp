// The server's connections under slow, idle and many clients (src/ai/transport.cpp), and who may
// call it (src/ai/access.cpp: CORS, the API key), on 127.0.0.1 with the scripted model and short
// deadlines.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "ai/access.h"
#include "serve_fixture.h"

using namespace gizml;
using namespace gizml::ai::servetest;
using nlohmann::json;

namespace {

// A connection from a source address of the loopback network (127.0.0.0/8 all reach it).
int connectFrom(int port, const char* source) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One response from a connection that stays open: the head, then Content-Length bytes (read a
// byte at a time, so that a response behind it stays for the next call).
Response readOne(int fd, int timeoutMs = 10000) {
  std::string raw;
  char buffer[1];
  for (;;) {
    const size_t headEnd = raw.find("\r\n\r\n");
    if (headEnd != std::string::npos) {
      const Response head = parseResponse(raw.substr(0, headEnd + 4));
      const size_t length = head.headers.count("content-length") ? std::stoul(head.headers.at("content-length")) : 0;
      if (raw.size() >= headEnd + 4 + length) return parseResponse(raw.substr(0, headEnd + 4 + length));
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeoutMs) <= 0) return {};
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return parseResponse(raw);
    raw.append(buffer, static_cast<size_t>(n));
  }
}

// The connection was closed by the server: end of file (after whatever it had sent).
bool closedByServer(int fd) {
  readAll(fd, 10000);
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

const std::string kGetModels = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
const std::string kPartialHead = "GET /v1/models HTTP/1.1\r\nHo";

struct TransportTest : ::testing::Test {
  TestModel test;
  std::unique_ptr<ai::Server> server;
  int port = 0;

  void start(ai::ServeOptions options) {
    options.port = 0;
    std::vector<ai::Served> served;
    served.push_back(test.served("fake", 2, 256));
    server = std::make_unique<ai::Server>(std::move(served), options);
    port = server->port();
  }
};

}  // namespace

TEST_F(TransportTest, AHeadThatDoesNotArriveInTimeGets408) {
  ai::ServeOptions o;
  o.headTimeoutMs = 200;
  start(o);
  const Response r = parseResponse(rawExchange(port, kPartialHead));
  EXPECT_EQ(r.status, 408);
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("head"), std::string::npos) << r.body;
  // A connection that sends nothing is closed without an answer.
  const int silent = connectTo(port);
  EXPECT_EQ(readAll(silent), "");
  EXPECT_TRUE(closedByServer(silent));
  ::close(silent);
  EXPECT_EQ(call(port, "GET", "/health").status, 200);
}

TEST_F(TransportTest, ABodyThatStopsComingGets408) {
  ai::ServeOptions o;
  o.bodyTimeoutMs = 200;
  start(o);
  const Response r = parseResponse(
      rawExchange(port, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab"));
  EXPECT_EQ(r.status, 408);
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("body"), std::string::npos) << r.body;
}

TEST_F(TransportTest, ABodyInPiecesIsReadWhole) {
  start({});
  const std::string body = json{{"prompt", "Hi"}, {"max_tokens", 2}}.dump();
  const int fd = connectTo(port);
  sendText(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n");
  for (size_t at = 0; at < body.size(); at += 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    sendText(fd, body.substr(at, 5));
  }
  const Response r = parseResponse(readAll(fd));
  ::close(fd);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["object"], "text_completion");
}

TEST_F(TransportTest, OneClientAddressHoldsAtMostItsCap) {
  ai::ServeOptions o;
  o.maxPerClient = 2;
  start(o);
  std::vector<int> slow;
  for (int i = 0; i < 2; ++i) {
    slow.push_back(connectTo(port));
    sendText(slow.back(), kPartialHead);
  }
  const Response refused = parseResponse(rawExchange(port, kGetModels));
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.headers.at("retry-after"), "1");
  EXPECT_NE(refused.json()["error"]["message"].get<std::string>().find("max-per-client"), std::string::npos);
  // Another address is served beside them.
  const int other = connectFrom(port, "127.0.0.2");
  ASSERT_GE(other, 0);
  sendText(other, kGetModels);
  EXPECT_EQ(readOne(other).status, 200);
  ::close(other);
  // The slow ones were never closed: they finish their requests.
  for (int fd : slow) {
    sendText(fd, "st: x\r\n\r\n");
    EXPECT_EQ(readOne(fd).status, 200);
    ::close(fd);
  }
}

TEST_F(TransportTest, AtTheCapTheLongestIdleKeptAliveConnectionMakesRoomElse503) {
  ai::ServeOptions o;
  o.maxConnections = 3;
  start(o);
  const int idleOld = connectTo(port), idleNew = connectTo(port);
  for (int fd : {idleOld, idleNew}) {
    sendText(fd, kGetModels);
    ASSERT_EQ(readOne(fd).status, 200);  // served, kept alive, now idle
  }
  const int busy = connectTo(port);
  sendText(busy, kPartialHead);
  // A fourth: the idle connection served longest ago is closed for it.
  const int fourth = connectTo(port);
  sendText(fourth, kGetModels);
  EXPECT_EQ(readOne(fourth).status, 200);
  EXPECT_TRUE(closedByServer(idleOld));
  sendText(idleNew, kGetModels);
  EXPECT_EQ(readOne(idleNew).status, 200);  // still open
  // Now busy, idleNew and fourth are open and the last two are streaming answers: no idle one, a
  // fifth gets 503.
  test.fake->stepDelayMs = 20;
  const std::string body = json{{"prompt", "Hi"}, {"max_tokens", 200}, {"stream", true}}.dump();
  for (int fd : {idleNew, fourth}) {
    sendText(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\n\r\n" + body);
    char buffer[256];
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(::poll(&p, 1, 10000), 0);
    ASSERT_GT(::recv(fd, buffer, sizeof buffer, 0), 0);  // the stream has begun
  }
  const Response refused = parseResponse(rawExchange(port, kGetModels));
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.headers.at("retry-after"), "1");
  EXPECT_NE(refused.json()["error"]["message"].get<std::string>().find("max-connections"), std::string::npos);
  for (int fd : {idleOld, idleNew, busy, fourth}) ::close(fd);
}

TEST_F(TransportTest, ManySlowConnectionsDoNotStopOthers) {
  ai::ServeOptions o;
  o.headTimeoutMs = 60000;  // they stay for the whole test
  start(o);
  // More than the 256 threads the server used to allow, each one byte into its head.
  std::vector<int> slow;
  for (int i = 0; i < 300; ++i) {
    const int fd = connectFrom(port, i % 2 ? "127.0.0.3" : "127.0.0.4");
    ASSERT_GE(fd, 0);
    sendText(fd, "G");
    slow.push_back(fd);
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(post(port, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}}).status, 200);
  // Each slow one is still open and still gets its answer.
  for (int fd : {slow.front(), slow.back()}) {
    sendText(fd, kGetModels.substr(1));
    EXPECT_EQ(readOne(fd).status, 200);
  }
  for (int fd : slow) ::close(fd);
  server.reset();  // stops with them closed or open
}

TEST_F(TransportTest, StopClosesWaitingConnections) {
  start({});
  const int waiting = connectTo(port);
  sendText(waiting, kPartialHead);
  server->stop();
  EXPECT_TRUE(closedByServer(waiting));
  ::close(waiting);
}

TEST_F(TransportTest, WithoutCorsOptionsIsAnsweredWithoutCorsHeaders) {
  start({});
  const Response r = call(port, "OPTIONS", "/v1/chat/completions", "",
                          "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n");
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.headers.at("allow"), "GET, POST, OPTIONS");
  EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(r.headers.count("content-length"), 0u);
  EXPECT_EQ(call(port, "OPTIONS", "*").status, 204);
  const Response get = call(port, "GET", "/v1/models", "", "Origin: https://app.example\r\n");
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.headers.count("access-control-allow-origin"), 0u);
}

TEST_F(TransportTest, CorsPreflightAndTheAllowOriginOnEveryAnswer) {
  ai::ServeOptions o;
  o.corsOrigins = {"https://app.example", "http://localhost:3000"};
  start(o);
  const Response pre = call(port, "OPTIONS", "/v1/chat/completions", "",
                            "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"
                            "Access-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n");
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(pre.headers.at("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(pre.headers.at("vary"), "Origin");
  EXPECT_EQ(pre.headers.at("access-control-allow-methods"), "GET, POST, OPTIONS");
  EXPECT_EQ(pre.headers.at("access-control-allow-headers"), "authorization, content-type, x-stainless-os");
  EXPECT_EQ(pre.headers.at("access-control-max-age"), "7200");
  // An origin not listed gets no CORS headers: the browser refuses the call.
  const Response other = call(port, "OPTIONS", "/v1/chat/completions", "",
                              "Origin: https://evil.example\r\nAccess-Control-Request-Method: POST\r\n");
  EXPECT_EQ(other.status, 204);
  EXPECT_EQ(other.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(other.headers.count("access-control-allow-methods"), 0u);
  EXPECT_EQ(other.headers.at("vary"), "Origin");  // a cache keeps its answer for that origin alone

  const std::string origin = "Origin: http://localhost:3000\r\n";
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 3}};
  const Response whole = call(port, "POST", "/v1/chat/completions", chat.dump(), origin);
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.headers.at("access-control-allow-origin"), "http://localhost:3000");
  json streaming = chat;
  streaming["stream"] = true;
  const Response streamed = call(port, "POST", "/v1/chat/completions", streaming.dump(), origin);
  EXPECT_EQ(streamed.headers.at("content-type"), "text/event-stream");
  EXPECT_EQ(streamed.headers.at("access-control-allow-origin"), "http://localhost:3000");
  const Response error = call(port, "GET", "/v1/nothing", "", origin);
  EXPECT_EQ(error.status, 404);
  EXPECT_EQ(error.headers.at("access-control-allow-origin"), "http://localhost:3000");
  // No Origin (not a browser): no CORS headers.
  const Response plain = call(port, "GET", "/v1/models");
  EXPECT_EQ(plain.headers.count("access-control-allow-origin"), 0u);
  EXPECT_EQ(plain.headers.at("vary"), "Origin");
}

TEST_F(TransportTest, CorsAnyOrigin) {
  ai::ServeOptions o;
  o.corsOrigins = {"*"};
  start(o);
  const Response r = call(port, "GET", "/health", "", "Origin: https://anything.example\r\n");
  EXPECT_EQ(r.headers.at("access-control-allow-origin"), "*");
  EXPECT_EQ(r.headers.count("vary"), 0u);
}

TEST_F(TransportTest, TheApiKeyIsRequiredOnEveryRouteButHealth) {
  ai::ServeOptions o;
  o.apiKey = "sk-local-123";
  o.corsOrigins = {"*"};
  start(o);
  for (const std::string& headers : {std::string(), std::string("Authorization: Bearer sk-local-12\r\n"),
                                     std::string("Authorization: Basic sk-local-123\r\n")}) {
    const Response r = call(port, "GET", "/v1/models", "", headers + "Origin: https://a.example\r\n");
    EXPECT_EQ(r.status, 401) << headers;
    const json error = r.json()["error"];
    EXPECT_EQ(error["type"], "invalid_request_error");
    EXPECT_EQ(error["code"], "invalid_api_key");
    EXPECT_TRUE(error["param"].is_null());
    EXPECT_FALSE(error["message"].get<std::string>().empty());
    EXPECT_EQ(r.headers.at("www-authenticate"), "Bearer");
    EXPECT_EQ(r.headers.at("access-control-allow-origin"), "*");  // so that the page can read why
  }
  EXPECT_EQ(post(port, "/v1/completions", {{"prompt", "Hi"}}).status, 401);
  EXPECT_EQ(call(port, "GET", "/health").status, 200);
  EXPECT_EQ(call(port, "OPTIONS", "/v1/models", "", "Origin: https://a.example\r\nAccess-Control-Request-Method: GET\r\n")
                .status, 204);  // preflights carry no key
  EXPECT_EQ(call(port, "GET", "/v1/models", "", "Authorization: Bearer sk-local-123\r\n").status, 200);
  EXPECT_EQ(call(port, "GET", "/models", "", "authorization: bearer sk-local-123\r\n").status, 200);
  const Response chat = call(port, "POST", "/v1/chat/completions",
                             json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}}.dump(),
                             "Authorization: Bearer sk-local-123\r\n");
  EXPECT_EQ(chat.status, 200);
  // A 401 keeps the connection: the next request on it is answered, in order.
  const int fd = connectTo(port);
  sendText(fd, kGetModels + "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-local-123\r\n\r\n");
  EXPECT_EQ(readOne(fd).status, 401);
  EXPECT_EQ(readOne(fd).status, 200);
  ::close(fd);
}

TEST(Access, KeysCompareWhole) {
  EXPECT_TRUE(ai::equalInConstantTime("sk-abc", "sk-abc"));
  EXPECT_TRUE(ai::equalInConstantTime("", ""));
  EXPECT_FALSE(ai::equalInConstantTime("sk-ab", "sk-abc"));
  EXPECT_FALSE(ai::equalInConstantTime("sk-abcd", "sk-abc"));
  EXPECT_FALSE(ai::equalInConstantTime("sk-abd", "sk-abc"));
  EXPECT_FALSE(ai::equalInConstantTime("", "sk-abc"));
  EXPECT_FALSE(ai::equalInConstantTime(std::string("sk-abc\0", 7), "sk-abc"));
}

namespace {

const std::string kPreflight = "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n";  // answered by the loop itself

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

TEST_F(TransportTest, AClientThatSendsAndNeverReadsIsNotBufferedWithoutEnd) {
  start({});
  const int fd = connectTo(port, 4096);
  ASSERT_GE(fd, 0);
  std::string requests;
  while (requests.size() < 64 * 1024) requests += kPreflight;
  // The server stops reading while its answers wait: our sends soon block (1 s without room);
  // before that it read on, holding every request in memory.
  size_t sent = 0;
  bool blocked = false;
  while (sent < 64u * 1024 * 1024 && !blocked) {
    const ssize_t n = ::send(fd, requests.data(), requests.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else {
      ASSERT_TRUE(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) << std::strerror(errno);
      pollfd p{fd, POLLOUT, 0};
      blocked = ::poll(&p, 1, 1000) == 0;
    }
  }
  EXPECT_TRUE(blocked) << sent << " bytes of requests were taken while none of the answers was read";
  ::close(fd);
}

TEST_F(TransportTest, ThousandsOfPipelinedRequestsReadLateAreAllAnswered) {
  start({});
  const int fd = connectTo(port, 4096);
  ASSERT_GE(fd, 0);
  // 6 MB of requests: before they were answered one inside the other's call, the loop's stack
  // overflowed; and the connection must not time out while it answers them, however long.
  constexpr size_t kRequests = 200000;
  std::string requests;
  for (size_t i = 0; i < kRequests; ++i) requests += kPreflight;
  // Send all we can before reading any answer, then read and send the rest together.
  size_t sent = 0, answered = 0;
  std::string unread;  // received, not yet counted
  char buffer[65536];
  bool reading = false;
  while (answered < kRequests) {
    pollfd p{fd, static_cast<short>(reading ? POLLIN | (sent < requests.size() ? POLLOUT : 0) : POLLOUT), 0};
    const int ready = ::poll(&p, 1, reading ? 10000 : 1000);
    if (ready == 0 && !reading) {
      reading = true;  // no more room: the server waits for us
      continue;
    }
    ASSERT_GT(ready, 0) << answered << " answers";
    if (p.revents & POLLOUT) {
      const ssize_t n = ::send(fd, requests.data() + sent, requests.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      ASSERT_GT(n, 0);
      sent += static_cast<size_t>(n);
      if (sent == requests.size()) reading = true;
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      ASSERT_GT(n, 0) << "the server closed after " << answered << " answers: " << unread.substr(0, 200);
      unread.append(buffer, static_cast<size_t>(n));
      const size_t last = unread.rfind("\r\n\r\n");  // the answers have no body
      if (last == std::string::npos) continue;
      const std::string whole = unread.substr(0, last + 4);
      answered += countOf(whole, "HTTP/1.1 204 ");
      ASSERT_EQ(countOf(whole, "HTTP/1.1 "), countOf(whole, "HTTP/1.1 204 ")) << whole.substr(0, 200);
      unread.erase(0, last + 4);
    }
  }
  EXPECT_EQ(answered, kRequests);
  ::close(fd);
}

TEST_F(TransportTest, AConnectionAnsweredByTheLoopAfterABodyWaitsAsIdleNotForMoreBody) {
  ai::ServeOptions o;
  o.apiKey = "sk-local-123";
  o.bodyTimeoutMs = 200;
  start(o);
  const int fd = connectTo(port);
  const std::string body = R"({"prompt":"Hi"})";
  // The body after the head has been read (a 100 Continue says so).
  sendText(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(readOne(fd).status, 100);
  sendText(fd, body);
  EXPECT_EQ(readOne(fd).status, 401);
  // Past the body deadline, the kept-alive connection still takes its next request (it was left
  // waiting for a body, and got a 408 and a close).
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  sendText(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(readOne(fd).status, 200);
  ::close(fd);
}

TEST_F(TransportTest, ABodyPromisedBy100ContinueThatDoesNotComeGets408) {
  ai::ServeOptions o;
  o.bodyTimeoutMs = 200;
  start(o);
  const int fd = connectTo(port);
  sendText(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n");
  EXPECT_EQ(readOne(fd).status, 100);
  EXPECT_EQ(readOne(fd).status, 408);
  ::close(fd);
}
