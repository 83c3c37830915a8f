// gizml::ai::Server (and serve): the routes on transport.h's connections from a Listener, and
// each completion run through its engine's scheduler and written whole or as Server-Sent Events.
#include <gizml/ai.h>
#include <gizml/error.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <mutex>
#include <random>

#include "ai/access.h"
#include "ai/choice.h"
#include "ai/error_response.h"
#include "ai/fingerprint.h"
#include "ai/http.h"
#include "ai/openai.h"
#include "ai/scheduler.h"
#include "ai/transport.h"

namespace gizml::ai {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The socket's send timeout (the transport's) bounds each send and the whole write too: a client
// that reads a byte now and then cannot hold the write (and its thread) for ever.
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
  std::string host;  // the listener's, for url()
  std::vector<Entry> models;
  std::vector<Target> targets;
  std::time_t created = std::time(nullptr);
  std::unique_ptr<Transport> transport;
  std::atomic<bool> stopping{false};
  std::mutex stopMutex;
  bool stopped = false;

  bool handle(int fd, const http::Request& request, bool keepAlive);
  bool complete(int fd, const http::Request& request, bool chat, bool keepAlive);
  Json modelObject(const Entry& e) const {
    return {{"id", e.name}, {"object", "model"}, {"created", created}, {"owned_by", "gizml"},
            {"context_length", e.context}};
  }
  void stop();
  ~Impl() { stop(); }
};

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
  if (transport) transport->stop();  // the handlers see stopping (or their sockets shut) and end
  for (Entry& e : models) e.scheduler->stop();
}

Server::Server(std::vector<Served> served, ServeOptions options)
    : Server(std::move(served), Listener(options.host, options.port), options) {}

Server::Server(std::vector<Served> served, Listener listener, ServeOptions options) : impl_(std::make_unique<Impl>()) {
  check(!served.empty(), "serve: no models to serve");
  for (size_t i = 0; i < served.size(); ++i) {
    check(!served[i].name.empty(), "serve: model " + std::to_string(i) + " has no name");
    for (size_t j = 0; j < i; ++j) check(served[j].name != served[i].name, "serve: two models are named '" + served[i].name + "'");
  }
  Impl& m = *impl_;
  m.options = options;
  m.host = listener.host();
  TransportOptions t;
  t.limits.body = options.maxBody;
  t.headTimeoutMs = options.headTimeoutMs;
  t.bodyTimeoutMs = options.bodyTimeoutMs;
  t.requestTimeoutMs = options.requestTimeoutMs;
  t.idleTimeoutMs = options.idleTimeoutMs;
  t.maxConnections = options.maxConnections;
  t.maxPerClient = options.maxPerClient;
  Access access({options.corsOrigins, options.apiKey});
  for (Served& s : served) {
    Impl::Entry e{s.name, s.model, nullptr, s.engine.maxTokens(), s.engine.slots(), systemFingerprint(s.model)};
    e.scheduler = std::make_unique<Scheduler>(std::move(s.engine));
    m.models.push_back(std::move(e));
  }
  for (const Impl::Entry& e : m.models) m.targets.push_back({e.name, &e.model, e.context, templateTakesTools(e.model), e.slots});
  m.transport = std::make_unique<Transport>(std::move(listener), std::move(t), std::move(access), [&m](int fd, const http::Request& r, bool keepAlive) {
    return m.handle(fd, r, keepAlive);
  });
}

Server::~Server() { impl_->stop(); }

int Server::port() const { return impl_->transport->port(); }

std::string Server::url() const {
  const std::string& host = impl_->host;
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port());
}

void Server::stop() { impl_->stop(); }

Server serve(std::vector<Served> engines, Listener listener, ServeOptions options) {
  return Server(std::move(engines), std::move(listener), std::move(options));
}

}  // namespace gizml::ai
