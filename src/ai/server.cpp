// gizml::ai::Server: the listening socket, a thread per connection reading requests with
// http.h's parser, the routes, and each completion run through its engine's scheduler and
// written whole or as Server-Sent Events.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gizml/ai.h>
#include <gizml/error.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <list>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "ai/choice.h"
#include "ai/fingerprint.h"
#include "ai/http.h"
#include "ai/openai.h"
#include "ai/scheduler.h"

namespace gizml::ai {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool sendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The client closed its side (or the server shut the socket down). Bytes it sent ahead (a
// pipelined request) are left to be read.
bool peerClosed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & (POLLIN | POLLRDHUP)) {
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return false;
}

std::string errorResponse(int status, const std::string& message, bool keepAlive, const std::string& param = "",
                          const std::string& code = "", std::vector<std::pair<std::string, std::string>> headers = {}) {
  const std::string type = status >= 500 ? "server_error" : status == 404 && param.empty() ? "not_found_error"
                                                                                           : "invalid_request_error";
  return http::response(status, "application/json", dump(errorBody(message, type, param, code)), keepAlive, headers);
}

std::string randomId() {
  static std::mutex mutex;
  static std::mt19937_64 engine{std::random_device{}()};
  static const char* digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::lock_guard lock(mutex);
  std::string id;
  for (int i = 0; i < 24; ++i) id += digits[engine() % 62];
  return id;
}

// Writes a streamed body: chunked on HTTP/1.1, raw on 1.0 (the connection then closes).
struct BodyWriter {
  int fd;
  bool chunked;
  bool write(std::string_view data) const { return sendAll(fd, chunked ? http::chunk(data) : std::string(data)); }
  bool end() const { return !chunked || sendAll(fd, http::lastChunk()); }
};

struct Connection {
  std::thread thread;
  int fd = -1;
  std::atomic<bool> finished{false};
};

}  // namespace

struct Server::Impl {
  struct Entry {
    std::string name;
    llm::Model model;
    std::unique_ptr<Scheduler> scheduler;
    int64_t context = 0;
    int slots = 1;
    std::string fingerprint;  // system_fingerprint
  };
  ServeOptions options;
  std::vector<Entry> models;
  std::vector<Target> targets;
  http::Limits limits;
  int listenFd = -1, wakeRead = -1, wakeWrite = -1, port = 0;
  std::time_t created = std::time(nullptr);
  std::thread acceptThread;
  std::mutex connectionsMutex;
  std::list<std::unique_ptr<Connection>> connections;
  std::atomic<bool> stopping{false};
  std::mutex stopMutex;
  bool stopped = false;

  void bind();
  void acceptLoop();
  void reap(bool all);
  void serveConnection(Connection& c);
  bool handle(int fd, const http::Request& request, bool keepAlive);
  bool complete(int fd, const http::Request& request, bool chat, bool keepAlive);
  Json modelObject(const Entry& e) const {
    return {{"id", e.name}, {"object", "model"}, {"created", created}, {"owned_by", "gizml"},
            {"context_length", e.context}};
  }
  void stop();
  ~Impl() { stop(); }
};

void Server::Impl::bind() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(options.port);
  const int rc = ::getaddrinfo(options.host.c_str(), service.c_str(), &hints, &found);
  check(rc == 0, "serve: cannot resolve host '" + options.host + "': " + ::gai_strerror(rc));
  std::string failure = "no address";
  for (addrinfo* a = found; a && listenFd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listenFd = fd;
    } else {
      failure = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  check(listenFd >= 0, "serve: cannot listen on " + options.host + ":" + service + ": " + failure);
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  ::getsockname(listenFd, reinterpret_cast<sockaddr*>(&bound), &size);
  port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int pipeFds[2];
  check(::pipe2(pipeFds, O_CLOEXEC | O_NONBLOCK) == 0, std::string("serve: pipe: ") + std::strerror(errno));
  wakeRead = pipeFds[0];
  wakeWrite = pipeFds[1];
}

void Server::Impl::reap(bool all) {
  std::list<std::unique_ptr<Connection>> done;
  {
    std::lock_guard lock(connectionsMutex);
    for (auto it = connections.begin(); it != connections.end();) {
      if (all || (*it)->finished) {
        done.push_back(std::move(*it));
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : done) {
    c->thread.join();
    ::close(c->fd);  // closed only once its thread is gone, so stop() never shuts a reused number
  }
}

void Server::Impl::acceptLoop() {
  while (!stopping) {
    pollfd fds[2] = {{listenFd, POLLIN, 0}, {wakeRead, POLLIN, 0}};
    const int ready = ::poll(fds, 2, 1000);
    reap(false);
    if (stopping) break;
    if (ready <= 0 || !(fds[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A client that stops reading fails the writes after this, and its request is cancelled.
    timeval sendTimeout{options.requestTimeoutMs / 1000, (options.requestTimeoutMs % 1000) * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, sizeof sendTimeout);
    std::lock_guard lock(connectionsMutex);
    if (static_cast<int>(connections.size()) >= options.maxConnections) {
      sendAll(fd, errorResponse(503, "the server has " + std::to_string(options.maxConnections) + " connections open",
                                false));
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    Connection* raw = c.get();
    raw->fd = fd;
    connections.push_back(std::move(c));
    raw->thread = std::thread([this, raw] {
      serveConnection(*raw);
      ::shutdown(raw->fd, SHUT_RDWR);
      raw->finished = true;
    });
  }
}

void Server::Impl::serveConnection(Connection& c) {
  const int fd = c.fd;
  std::string buffer;
  std::vector<char> chunk(64 * 1024);
  while (!stopping) {
    http::Request request;
    http::Parse parse;
    bool continued = false;
    const Clock::time_point idleDeadline = Clock::now() + std::chrono::milliseconds(options.idleTimeoutMs);
    std::optional<Clock::time_point> requestDeadline;
    if (!buffer.empty()) requestDeadline = Clock::now() + std::chrono::milliseconds(options.requestTimeoutMs);
    for (;;) {
      parse = http::parseRequest(buffer, limits, request);
      if (parse.kind != http::Parse::Incomplete) break;
      if (parse.headersDone && request.expectContinue && !continued) {
        if (!sendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) return;
        continued = true;
      }
      const Clock::time_point deadline = requestDeadline ? *requestDeadline : idleDeadline;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        if (requestDeadline)
          sendAll(fd, errorResponse(408, "the request did not arrive within " +
                                             std::to_string(options.requestTimeoutMs) + " ms", false));
        return;
      }
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 500)));
      if (stopping) return;
      if (ready <= 0) continue;
      const ssize_t n = ::recv(fd, chunk.data(), chunk.size(), 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return;
      buffer.append(chunk.data(), static_cast<size_t>(n));
      if (!requestDeadline) requestDeadline = Clock::now() + std::chrono::milliseconds(options.requestTimeoutMs);
    }
    if (parse.kind == http::Parse::Error) {
      sendAll(fd, errorResponse(parse.status, parse.message, false));
      return;
    }
    buffer.erase(0, parse.consumed);
    const bool keepAlive = request.keepAlive && !stopping;
    if (!handle(fd, request, keepAlive) || !keepAlive) return;
  }
}

bool Server::Impl::handle(int fd, const http::Request& request, bool keepAlive) {
  std::string_view path = request.path();
  const std::string_view full = path;
  if (path.substr(0, 3) == "/v1" && (path.size() == 3 || path[3] == '/')) path.remove_prefix(3);
  const auto methodNotAllowed = [&](const char* allow) {
    return sendAll(fd, errorResponse(405, "method " + request.method + " is not allowed on " + std::string(full) +
                                              " (use " + allow + ")",
                                     keepAlive, "", "method_not_allowed", {{"Allow", allow}}));
  };
  if (path == "/models" || full == "/health") {
    if (request.method != "GET") return methodNotAllowed("GET");
    Json body;
    if (full == "/health") {
      body = {{"status", "ok"}};
    } else {
      Json data = Json::array();
      for (const Entry& e : models) data.push_back(modelObject(e));
      body = {{"object", "list"}, {"data", data}};
    }
    return sendAll(fd, http::response(200, "application/json", dump(body), keepAlive));
  }
  if (path.substr(0, 8) == "/models/") {
    if (request.method != "GET") return methodNotAllowed("GET");
    const std::string name(path.substr(8));
    for (const Entry& e : models)
      if (e.name == name) return sendAll(fd, http::response(200, "application/json", dump(modelObject(e)), keepAlive));
    return sendAll(fd, errorResponse(404, "The model '" + name + "' does not exist", keepAlive, "model", "model_not_found"));
  }
  if (path == "/chat/completions" || path == "/completions") {
    if (request.method != "POST") return methodNotAllowed("POST");
    try {
      return complete(fd, request, path == "/chat/completions", keepAlive);
    } catch (const ApiError& e) {
      return sendAll(fd, errorResponse(e.status, e.what(), keepAlive, e.param, e.code));
    } catch (const std::exception& e) {
      return sendAll(fd, errorResponse(500, std::string("internal error: ") + e.what(), keepAlive));
    }
  }
  return sendAll(fd, errorResponse(404, "no route for " + request.method + " " + std::string(full) +
                                            " (served: GET /v1/models, POST /v1/chat/completions, POST /v1/completions)",
                                   keepAlive, "", "not_found"));
}

bool Server::Impl::complete(int fd, const http::Request& request, bool chat, bool keepAlive) {
  Generation g = parseGeneration(request.body, chat, targets, options.thinking);
  Entry& entry = models[g.target];
  const Tokenizer& tokenizer = entry.model.tokenizer();
  const int64_t promptTokens = static_cast<int64_t>(g.request.prompt.size());
  std::vector<ChoiceWriter> choices;
  for (int i = 0; i < g.choices; ++i) choices.emplace_back(tokenizer, g, static_cast<size_t>(i), randomId);
  auto job = std::make_shared<Job>();
  job->request = std::move(g.request);
  job->choices = g.choices;
  entry.scheduler->submit(job);

  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + randomId();
  const std::time_t created = std::time(nullptr);
  const char* object = chat ? (g.stream ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  const auto base = [&] {
    return Json{{"id", id}, {"object", object}, {"created", created}, {"model", entry.name},
                {"system_fingerprint", entry.fingerprint}};
  };
  const BodyWriter writer{fd, request.minor >= 1};
  const auto event = [&](const Json& j) { return writer.write("data: " + dump(j) + "\n\n"); };
  const auto chunkOf = [&](Json choicesJson) {
    Json c = base();
    c["choices"] = std::move(choicesJson);
    return c;
  };
  bool headSent = false;
  int64_t cached = 0;
  const auto usage = [&] {
    int64_t completion = 0;
    for (const ChoiceWriter& c : choices) completion += c.completionTokens();
    return Json{{"prompt_tokens", promptTokens}, {"completion_tokens", completion},
                {"total_tokens", promptTokens + completion}, {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  };
  const auto allFinished = [&] {
    return std::all_of(choices.begin(), choices.end(), [](const ChoiceWriter& c) { return c.finished(); });
  };

  for (;;) {
    Job::Taken t = job->take(std::chrono::milliseconds(50));
    if (t.empty() && !t.done) {
      if (stopping || peerClosed(fd)) {
        entry.scheduler->cancel(job);
        return false;
      }
      continue;
    }
    if (t.done && t.errorStatus != 0) {
      if (!headSent) return sendAll(fd, errorResponse(t.errorStatus, t.error, keepAlive && t.errorStatus < 500));
      event(errorBody(t.error, "server_error", "", ""));
      writer.write("data: [DONE]\n\n");
      writer.end();
      return false;
    }
    cached = t.cached;
    for (size_t i = 0; i < choices.size(); ++i) choices[i].take(t.choices[i]);
    const bool finished = allFinished();
    if (finished && !t.done) entry.scheduler->cancel(job);  // stop strings ended them first

    if (g.stream) {
      if (!headSent) {
        if (!sendAll(fd, http::streamHead(200, "text/event-stream", keepAlive, writer.chunked))) break;
        headSent = true;
        if (chat)
          for (const ChoiceWriter& c : choices)
            if (!event(chunkOf(Json::array({c.opening()})))) {
              entry.scheduler->cancel(job);
              return false;
            }
      }
      for (ChoiceWriter& c : choices)
        for (Json& choice : c.chunks())
          if (!event(chunkOf(Json::array({std::move(choice)})))) {
            entry.scheduler->cancel(job);
            return false;
          }
      if (!finished) continue;
      bool ok = true;
      if (g.includeUsage) {
        Json last = chunkOf(Json::array());
        last["usage"] = usage();
        ok = event(last);
      }
      ok = ok && writer.write("data: [DONE]\n\n") && writer.end();
      return ok && writer.chunked;
    }
    if (!finished) continue;
    Json all = Json::array();
    for (const ChoiceWriter& c : choices) all.push_back(c.whole());
    Json body = chunkOf(std::move(all));
    body["usage"] = usage();
    return sendAll(fd, http::response(200, "application/json", dump(body), keepAlive));
  }
  entry.scheduler->cancel(job);
  return false;
}

void Server::Impl::stop() {
  std::lock_guard lock(stopMutex);
  if (stopped) return;
  stopped = true;
  stopping = true;
  if (wakeWrite >= 0) (void)!::write(wakeWrite, "x", 1);
  if (acceptThread.joinable()) acceptThread.join();
  if (listenFd >= 0) ::close(listenFd);
  listenFd = -1;
  {
    std::lock_guard connectionsLock(connectionsMutex);
    for (auto& c : connections) ::shutdown(c->fd, SHUT_RDWR);
  }
  for (Entry& e : models) e.scheduler->stop();
  reap(true);
  for (int* fd : {&wakeRead, &wakeWrite})
    if (*fd >= 0) ::close(*fd), *fd = -1;
}

Server::Server(std::vector<Served> served, ServeOptions options) : impl_(std::make_unique<Impl>()) {
  check(!served.empty(), "serve: no models to serve");
  for (size_t i = 0; i < served.size(); ++i) {
    check(!served[i].name.empty(), "serve: model " + std::to_string(i) + " has no name");
    for (size_t j = 0; j < i; ++j) check(served[j].name != served[i].name, "serve: two models are named '" + served[i].name + "'");
  }
  check(options.port >= 0 && options.port <= 65535, "serve: port " + std::to_string(options.port) + " is not in [0, 65535]");
  check(options.requestTimeoutMs > 0 && options.idleTimeoutMs > 0 && options.maxConnections > 0,
        "serve: timeouts and maxConnections must be positive");
  Impl& m = *impl_;
  m.options = options;
  m.limits.body = options.maxBody;
  m.bind();
  for (Served& s : served) {
    Impl::Entry e{s.name, s.model, nullptr, s.engine.maxTokens(), s.engine.slots(), systemFingerprint(s.model)};
    e.scheduler = std::make_unique<Scheduler>(std::move(s.engine));
    m.models.push_back(std::move(e));
  }
  for (const Impl::Entry& e : m.models) m.targets.push_back({e.name, &e.model, e.context, templateWritesTools(e.model), e.slots});
  m.acceptThread = std::thread([&m] { m.acceptLoop(); });
}

Server::~Server() { impl_->stop(); }

int Server::port() const { return impl_->port; }

std::string Server::url() const {
  const std::string& host = impl_->options.host;
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(impl_->port);
}

void Server::stop() { impl_->stop(); }

}  // namespace gizml::ai
