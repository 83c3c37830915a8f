// gizml::ai::Server (and serve): the routes on transport.h's connections from a Listener, and
// each completion run through its engine's scheduler and written by its Reply (reply.h).
#include <gizml/ai.h>
#include <gizml/error.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <gizml/image.h>
#include <mutex>
#include <random>

#include "ai/access.h"
#include "ai/base64.h"
#include "ai/completion.h"
#include "ai/error_response.h"
#include "ai/fingerprint.h"
#include "ai/http.h"
#include "ai/images.h"
#include "ai/openai.h"
#include "ai/painter.h"
#include "ai/reply.h"
#include "ai/scheduler.h"
#include "ai/transport.h"
#include "core/json_text.h"

namespace gizml::ai {
namespace {

using Json = nlohmann::ordered_json;

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

}  // namespace

struct Server::Impl {
  struct Entry {
    std::string name;
    llm::Model model;
    std::unique_ptr<Scheduler> scheduler;
    int64_t context = 0;
    int slots = 1;
    std::string fingerprint;  // system_fingerprint
    std::shared_ptr<const vision::Tower> tower;  // null: the chats show no pictures
  };
  ServeOptions options;
  std::string host;  // the listener's, for url()
  struct PainterEntry {
    std::string name;
    std::unique_ptr<Painter> painter;
  };
  std::vector<Entry> models;
  std::vector<Target> targets;
  std::vector<PainterEntry> painters;
  std::vector<ImageTarget> imageTargets;
  std::vector<std::string> chatNames, imageNames;
  std::time_t created = std::time(nullptr);
  std::unique_ptr<Transport> transport;
  std::atomic<bool> stopping{false};
  std::mutex stopMutex;
  bool stopped = false;

  bool handle(int fd, const http::Request& request, bool keepAlive);
  bool complete(int fd, const http::Request& request, bool chat, bool keepAlive);
  bool paint(int fd, const http::Request& request, bool edit, bool keepAlive);
  Json modelObject(const Entry& e) const {
    return {{"id", e.name}, {"object", "model"}, {"created", created}, {"owned_by", "gizml"},
            {"context_length", e.context}};
  }
  Json modelObject(const PainterEntry& e) const {
    return {{"id", e.name}, {"object", "model"}, {"created", created}, {"owned_by", "gizml"}};
  }
  void stop();
  ~Impl() { stop(); }
};

bool Server::Impl::handle(int fd, const http::Request& request, bool keepAlive) {
  std::string_view path = request.path();
  const std::string_view full = path;
  if (path.substr(0, 3) == "/v1" && (path.size() == 3 || path[3] == '/')) path.remove_prefix(3);
  const auto methodNotAllowed = [&](const char* allow) {
    return sendWhole(fd, errorResponse(405, "method " + request.method + " is not allowed on " + std::string(full) +
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
      for (const PainterEntry& e : painters) data.push_back(modelObject(e));
      body = {{"object", "list"}, {"data", data}};
    }
    return sendWhole(fd, http::response(200, "application/json", jsonText(body), keepAlive));
  }
  if (path.substr(0, 8) == "/models/") {
    if (request.method != "GET") return methodNotAllowed("GET");
    const std::string name(path.substr(8));
    for (const Entry& e : models)
      if (e.name == name) return sendWhole(fd, http::response(200, "application/json", jsonText(modelObject(e)), keepAlive));
    for (const PainterEntry& e : painters)
      if (e.name == name) return sendWhole(fd, http::response(200, "application/json", jsonText(modelObject(e)), keepAlive));
    return sendWhole(fd, errorResponse(404, "The model '" + name + "' does not exist", keepAlive, "model", "model_not_found"));
  }
  if (path == "/chat/completions" || path == "/completions" || path == "/images/generations" ||
      path == "/images/edits") {
    if (request.method != "POST") return methodNotAllowed("POST");
    try {
      if (path.substr(0, 8) == "/images/") return paint(fd, request, path == "/images/edits", keepAlive);
      return complete(fd, request, path == "/chat/completions", keepAlive);
    } catch (const ApiError& e) {
      return sendWhole(fd, errorResponse(e.status, e.what(), keepAlive, e.param, e.code));
    } catch (const std::exception& e) {
      return sendWhole(fd, errorResponse(500, std::string("internal error: ") + e.what(), keepAlive));
    }
  }
  return sendWhole(fd, errorResponse(404, "no route for " + request.method + " " + std::string(full) +
                                            " (served: GET /v1/models, POST /v1/chat/completions, POST /v1/completions, POST /v1/images/generations, "
                                            "POST /v1/images/edits)",
                                   keepAlive, "", "not_found"));
}

// The request's choices from its engine, taken as they come and written by its Reply.
bool Server::Impl::complete(int fd, const http::Request& request, bool chat, bool keepAlive) {
  if (targets.empty())
    throw ApiError(404, "no language model is served here (only images: POST /v1/images/generations)", "model",
                   "model_not_found");
  Generation g = parseGeneration(request.body, chat, targets, options.thinking, imageNames);
  Entry& entry = models[g.target];
  Completion completion(g, entry.model.tokenizer(), entry.name, entry.fingerprint, randomId);
  const std::unique_ptr<Reply> reply =
      g.stream ? streamedReply(fd, keepAlive, request.minor >= 1, g.includeUsage) : wholeReply(fd, keepAlive);
  auto job = std::make_shared<Job>();
  job->request = std::move(g.request);
  job->choices = g.choices;
  entry.scheduler->submit(job);
  for (;;) {
    Job::Taken t = job->take(std::chrono::milliseconds(50));
    if (t.empty() && !t.done) {
      if (stopping || peerClosed(fd)) break;
      continue;
    }
    if (t.errorStatus != 0) return reply->fail(t.errorStatus, t.error);
    completion.take(t);
    if (!reply->send(completion)) break;
    if (completion.finished()) return reply->end(completion);
  }
  entry.scheduler->cancel(job);
  return false;
}

// The request's pictures (a generation's, or an edit's) from its model's painter, as PNG files in base64.
bool Server::Impl::paint(int fd, const http::Request& request, bool edit, bool keepAlive) {
  if (painters.empty())
    throw ApiError(404, "no image model is served here (giz serve --image NAME=FOLDER)", "model", "model_not_found");
  const std::string* contentType = request.header("content-type");
  if (edit && !contentType) throw ApiError(400, "an edit's body is a multipart/form-data form: no Content-Type given");
  ImageRequest r = edit ? parseEditRequest(*contentType, request.body, imageTargets, chatNames)
                        : parseImageRequest(request.body, imageTargets, chatNames);
  const auto job = std::make_shared<PaintJob>(std::move(r));
  painters[job->request.target].painter->submit(job);
  while (!job->wait(std::chrono::milliseconds(50))) {
    if (stopping || peerClosed(fd)) {
      job->cancel();  // the painter drops it at its next step
      return false;
    }
  }
  if (job->promptError()) throw ApiError(400, "prompt: " + job->error(), "prompt");
  if (!job->error().empty()) throw Error("painting failed: " + job->error());
  Json data = Json::array();
  for (const std::vector<uint8_t>& png : job->pngs()) data.push_back({{"b64_json", base64(png)}});
  const Json body = {{"created", std::time(nullptr)}, {"data", data}};
  return sendWhole(fd, http::response(200, "application/json", jsonText(body), keepAlive));
}

void Server::Impl::stop() {
  std::lock_guard lock(stopMutex);
  if (stopped) return;
  stopped = true;
  stopping = true;
  if (transport) transport->stop();  // the handlers see stopping (or their sockets shut) and end
  for (Entry& e : models) e.scheduler->stop();
  for (PainterEntry& e : painters) e.painter->stop();
}

Server::Server(std::vector<Served> served, ServeOptions options)
    : Server(std::move(served), Listener(options.host, options.port), options) {}

Server::Server(std::vector<Served> served, Listener listener, ServeOptions options)
    : Server(std::move(served), {}, std::move(listener), std::move(options)) {}

Server::Server(std::vector<Served> served, std::vector<ServedPainter> painters, Listener listener, ServeOptions options)
    : impl_(std::make_unique<Impl>()) {
  check(!served.empty() || !painters.empty(), "serve: no models to serve");
  check(options.picturePixels >= 1,
        "serve: picturePixels is " + std::to_string(options.picturePixels) + ", below 1 (the pictures' pixel budget)");
  std::vector<std::string> names;
  for (const Served& s : served) {
    if (s.tower && s.tower->config().outHidden != s.model.hiddenSize())
      throw Error("serve: the vision tower of '" + s.name + "' gives rows of " +
                  std::to_string(s.tower->config().outHidden) + " values, its model reads " +
                  std::to_string(s.model.hiddenSize()));
    names.push_back(s.name);
  }
  for (const ServedPainter& p : painters) {
    check(p.maxSide >= 16, "serve: image model '" + p.name + "' has a largest side below 16");
    names.push_back(p.name);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    check(!names[i].empty(), "serve: model " + std::to_string(i) + " has no name");
    for (size_t j = 0; j < i; ++j) check(names[j] != names[i], "serve: two models are named '" + names[i] + "'");
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
    Impl::Entry e{s.name, s.model, nullptr, s.engine.maxTokens(), s.engine.slots(), systemFingerprint(s.model), s.tower};
    e.scheduler = std::make_unique<Scheduler>(std::move(s.engine));
    m.models.push_back(std::move(e));
  }
  for (const Impl::Entry& e : m.models) {
    m.targets.push_back({e.name, &e.model, e.context, templateTakesTools(e.model), e.slots, e.tower.get(),
                         options.picturePixels});
    m.chatNames.push_back(e.name);
  }
  for (ServedPainter& p : painters) {
    ImageTarget target{p.name, std::visit([](const auto& q) { return q.sizeMultiple(); }, p.pipeline), p.maxSide,
                       p.upsampler != nullptr, {}};
    if (const auto* klein = std::get_if<diffusion::KleinPipeline>(&p.pipeline))
      target.editSize = [klein = *klein](const image::Image& first) { return klein.editSize(first); };
    m.imageTargets.push_back(std::move(target));
    m.imageNames.push_back(p.name);
    m.painters.push_back({p.name, std::make_unique<Painter>(std::move(p.pipeline), std::move(p.upsampler))});
  }
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

Server serve(std::vector<Served> engines, std::vector<ServedPainter> painters, Listener listener, ServeOptions options) {
  return Server(std::move(engines), std::move(painters), std::move(listener), std::move(options));
}

}  // namespace gizml::ai
