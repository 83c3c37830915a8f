// gizml::ai::Server: the routes on transport.h's connections, and each completion run through
// its engine's scheduler and written whole or as Server-Sent Events.
#include <gizml/ai.h>
#include <gizml/error.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <mutex>
#include <random>

#include "ai/access.h"
#include "ai/answer.h"
#include "ai/error_response.h"
#include "ai/http.h"
#include "ai/openai.h"
#include "ai/scheduler.h"
#include "ai/transport.h"

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

Json logprobEntry(const Tokenizer& tokenizer, TokenId id, float logprob) {
  const std::string text = tokenizer.decode(std::span<const TokenId>(&id, 1), false);
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
}

}  // namespace

struct Server::Impl {
  struct Entry {
    std::string name;
    llm::Model model;
    std::unique_ptr<Scheduler> scheduler;
    int64_t context = 0;
  };
  ServeOptions options;
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
  TextStream text(tokenizer, g.request.stop);
  AnswerStream answer(chat && g.reasoning, chat ? g.tools : Json::array(), g.inReasoning);
  auto job = std::make_shared<Job>();
  job->request = std::move(g.request);
  entry.scheduler->submit(job);

  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + randomId();
  const std::time_t created = std::time(nullptr);
  const auto base = [&](const char* object) {
    return Json{{"id", id}, {"object", object}, {"created", created}, {"model", entry.name}};
  };
  const BodyWriter writer{fd, request.minor >= 1};
  const auto event = [&](const Json& j) { return writer.write("data: " + dump(j) + "\n\n"); };
  bool headSent = false;
  int64_t completionTokens = 0;
  std::string content, reasoning;
  Json chatLogprobs = Json::array();
  Json tokensLp = Json::array(), tokenLogprobs = Json::array(), topLogprobs = Json::array(),
       offsets = Json::array();
  size_t textOffset = 0;
  llm::Finish finish = llm::Finish::Running;

  for (;;) {
    Job::Taken t = job->take(std::chrono::milliseconds(50));
    if (t.tokens.empty() && !t.done) {
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
    completionTokens += static_cast<int64_t>(t.tokens.size());
    std::string piece;
    for (TokenId token : t.tokens) piece += text.push(token);
    if (text.stopped() && !t.done) {  // the engine stops there too; no need to wait for it
      entry.scheduler->cancel(job);
      t.done = true;
      t.finish = llm::Finish::Stop;
    }
    if (t.done) piece += text.finish();
    AnswerStream::Delta delta;
    if (chat) {
      delta = answer.push(piece);
      if (t.done) {
        const AnswerStream::Delta rest = answer.finish();
        delta.content += rest.content;
        delta.reasoning += rest.reasoning;
      }
    } else {
      delta.content = std::move(piece);
    }
    // Log probabilities of this step's tokens.
    Json stepChat = Json::array();
    Json stepTokens = Json::array(), stepLogprobs = Json::array(), stepTop = Json::array(), stepOffsets = Json::array();
    for (const llm::TokenLogprob& l : t.logprobs) {
      if (chat) {
        Json entryLp = logprobEntry(tokenizer, l.token, l.logprob);
        Json top = Json::array();
        for (const auto& [tok, lp] : l.top) top.push_back(logprobEntry(tokenizer, tok, lp));
        entryLp["top_logprobs"] = top;
        stepChat.push_back(std::move(entryLp));
      } else {
        const std::string tokText = tokenizer.decode(std::span<const TokenId>(&l.token, 1), false);
        stepTokens.push_back(tokText);
        stepLogprobs.push_back(l.logprob);
        Json top = Json::object();
        for (const auto& [tok, lp] : l.top) top[tokenizer.decode(std::span<const TokenId>(&tok, 1), false)] = lp;
        stepTop.push_back(top);
        stepOffsets.push_back(textOffset);
        textOffset += tokText.size();
      }
    }
    if (t.done) finish = t.finish;
    const std::vector<ToolCall>& calls = answer.calls();
    const char* finishReason = !calls.empty() ? "tool_calls" : finish == llm::Finish::Length ? "length" : "stop";
    Json toolCalls = Json::array();
    for (size_t i = 0; i < calls.size(); ++i)
      toolCalls.push_back({{"index", i}, {"id", "call_" + randomId()}, {"type", "function"},
                           {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});

    if (g.stream) {
      if (!headSent) {
        if (!sendAll(fd, http::streamHead(200, "text/event-stream", keepAlive, writer.chunked)))
          break;
        headSent = true;
        if (chat) {
          Json first = base("chat.completion.chunk");
          first["choices"] = Json::array({{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                                           {"logprobs", nullptr}, {"finish_reason", nullptr}}});
          if (!event(first)) break;
        }
      }
      const bool hasLogprobs = chat ? !stepChat.empty() : !stepTokens.empty();
      if (!delta.empty() || hasLogprobs || !toolCalls.empty()) {
        Json choice = {{"index", 0}};
        if (chat) {
          Json d = Json::object();
          if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
          if (!delta.content.empty()) d["content"] = delta.content;
          if (!toolCalls.empty()) d["tool_calls"] = toolCalls;
          choice["delta"] = d;
          choice["logprobs"] = hasLogprobs ? Json{{"content", stepChat}} : Json(nullptr);
        } else {
          choice["text"] = delta.content;
          choice["logprobs"] = hasLogprobs ? Json{{"tokens", stepTokens}, {"token_logprobs", stepLogprobs},
                                                  {"top_logprobs", stepTop}, {"text_offset", stepOffsets}}
                                           : Json(nullptr);
        }
        choice["finish_reason"] = nullptr;
        Json c = base(chat ? "chat.completion.chunk" : "text_completion");
        c["choices"] = Json::array({choice});
        if (!event(c)) {
          entry.scheduler->cancel(job);
          return false;
        }
      }
      if (t.done) {
        Json last = base(chat ? "chat.completion.chunk" : "text_completion");
        Json choice = {{"index", 0}};
        if (chat) choice["delta"] = Json::object();
        else choice["text"] = "";
        choice["logprobs"] = nullptr;
        choice["finish_reason"] = finishReason;
        last["choices"] = Json::array({choice});
        bool ok = event(last);
        if (ok && g.includeUsage) {
          Json usage = base(chat ? "chat.completion.chunk" : "text_completion");
          usage["choices"] = Json::array();
          usage["usage"] = {{"prompt_tokens", promptTokens}, {"completion_tokens", completionTokens},
                            {"total_tokens", promptTokens + completionTokens}};
          ok = event(usage);
        }
        ok = ok && writer.write("data: [DONE]\n\n") && writer.end();
        return ok && writer.chunked;
      }
      continue;
    }

    content += delta.content;
    reasoning += delta.reasoning;
    for (Json& e : stepChat) chatLogprobs.push_back(std::move(e));
    for (size_t i = 0; i < stepTokens.size(); ++i) {
      tokensLp.push_back(stepTokens[i]);
      tokenLogprobs.push_back(stepLogprobs[i]);
      topLogprobs.push_back(stepTop[i]);
      offsets.push_back(stepOffsets[i]);
    }
    if (!t.done) continue;
    Json body = base(chat ? "chat.completion" : "text_completion");
    Json choice = {{"index", 0}};
    const bool wantLogprobs = g.logprobs >= 0;
    if (chat) {
      Json message = {{"role", "assistant"}};
      if (!calls.empty()) {
        while (!content.empty() && (content.back() == '\n' || content.back() == ' ')) content.pop_back();
        message["content"] = content.empty() ? Json(nullptr) : Json(content);
        message["tool_calls"] = toolCalls;
        for (Json& call : message["tool_calls"]) call.erase("index");
      } else {
        message["content"] = content;
      }
      if (!reasoning.empty()) message["reasoning_content"] = reasoning;
      choice["message"] = message;
      choice["logprobs"] = wantLogprobs ? Json{{"content", chatLogprobs}} : Json(nullptr);
    } else {
      choice["text"] = content;
      choice["logprobs"] = wantLogprobs ? Json{{"tokens", tokensLp}, {"token_logprobs", tokenLogprobs},
                                               {"top_logprobs", topLogprobs}, {"text_offset", offsets}}
                                        : Json(nullptr);
    }
    choice["finish_reason"] = finishReason;
    body["choices"] = Json::array({choice});
    body["usage"] = {{"prompt_tokens", promptTokens}, {"completion_tokens", completionTokens},
                     {"total_tokens", promptTokens + completionTokens}};
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

Server::Server(std::vector<Served> served, ServeOptions options) : impl_(std::make_unique<Impl>()) {
  check(!served.empty(), "serve: no models to serve");
  for (size_t i = 0; i < served.size(); ++i) {
    check(!served[i].name.empty(), "serve: model " + std::to_string(i) + " has no name");
    for (size_t j = 0; j < i; ++j) check(served[j].name != served[i].name, "serve: two models are named '" + served[i].name + "'");
  }
  check(options.port >= 0 && options.port <= 65535, "serve: port " + std::to_string(options.port) + " is not in [0, 65535]");
  Impl& m = *impl_;
  m.options = options;
  TransportOptions t;
  t.host = options.host;
  t.port = options.port;
  t.limits.body = options.maxBody;
  t.headTimeoutMs = options.headTimeoutMs;
  t.bodyTimeoutMs = options.bodyTimeoutMs;
  t.requestTimeoutMs = options.requestTimeoutMs;
  t.idleTimeoutMs = options.idleTimeoutMs;
  t.maxConnections = options.maxConnections;
  t.maxPerClient = options.maxPerClient;
  Access access({options.corsOrigins, options.apiKey});
  for (Served& s : served) {
    Impl::Entry e{s.name, s.model, nullptr, s.engine.maxTokens()};
    e.scheduler = std::make_unique<Scheduler>(std::move(s.engine));
    m.models.push_back(std::move(e));
  }
  for (const Impl::Entry& e : m.models) m.targets.push_back({e.name, &e.model, e.context});
  m.transport = std::make_unique<Transport>(std::move(t), std::move(access), [&m](int fd, const http::Request& r, bool keepAlive) {
    return m.handle(fd, r, keepAlive);
  });
}

Server::~Server() { impl_->stop(); }

int Server::port() const { return impl_->transport->port(); }

std::string Server::url() const {
  const std::string& host = impl_->options.host;
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port());
}

void Server::stop() { impl_->stop(); }

}  // namespace gizml::ai
