#pragma once
// What the server tests share: a scripted stand-in model on the Qwen3 tokenizer and template,
// and a small HTTP client on POSIX sockets.
#include <arpa/inet.h>
#include <gizml/ai.h>
#include <gizml/llm.h>
#include <gizml/tensor.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "llm/language_model.h"
#include "../common/test_paths.h"

namespace gizml::ai::servetest {

using llm::TokenId;
using llm::Tokenizer;

class ScriptState : public llm::SequenceState {
 public:
  explicit ScriptState(int64_t capacity) : capacity_(capacity) {}
  int64_t length() const override { return static_cast<int64_t>(tokens.size()); }
  int64_t capacity() const override { return capacity_; }
  void truncate(int64_t n) override {
    tokens.resize(static_cast<size_t>(n));
    fresh = true;  // the engine truncates when a request starts: its prompt's rest comes next
  }
  bool copyFrom(const llm::SequenceState& other) override {
    const auto* from = dynamic_cast<const ScriptState*>(&other);
    if (!from || from->capacity_ != capacity_) return false;
    tokens = from->tokens, fresh = from->fresh, answerFrom = from->answerFrom;
    return true;
  }
  std::vector<int32_t> tokens;
  bool fresh = true;
  size_t answerFrom = 0;

 private:
  int64_t capacity_;
};

/// A model on a real tokenizer's vocabulary whose answers tests can predict. Without a script,
/// it writes only ids 0..31 (Qwen3 spells them '!'..'@'), chosen by a wave over the tokens read
/// (as tests/llm/fake_model.h), and ends its turn after endAfter tokens (never when negative).
/// With a script, it writes the script's tokens and then ends its turn. hidden: the width it
/// claims (a vision tower's rows must have it); it reads no picture rows.
class ScriptModel : public llm::LanguageModel {
 public:
  ScriptModel(int64_t vocab, TokenId endOfTurn, int64_t hidden = 0) : endOfTurn_(endOfTurn) {
    config_.vocabSize = vocab;
    config_.maxPositions = 4096;
    config_.hiddenSize = hidden;
  }
  const llm::ModelConfig& config() const override { return config_; }
  std::unique_ptr<llm::SequenceState> newState(int64_t maxTokens) const override {
    return std::make_unique<ScriptState>(maxTokens);
  }
  std::vector<tensor::Tensor> forward(const std::vector<llm::Feed>& feeds) override {
    passes++;
    for (const llm::Feed& feed : feeds) fed += static_cast<int64_t>(feed.tokens.size());
    if (stepDelayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(stepDelayMs.load()));
    std::vector<tensor::Tensor> out;
    for (const llm::Feed& feed : feeds) {
      auto& state = dynamic_cast<ScriptState&>(*feed.state);
      state.tokens.insert(state.tokens.end(), feed.tokens.begin(), feed.tokens.end());
      if (state.fresh) state.answerFrom = state.tokens.size(), state.fresh = false;
      const size_t index = state.tokens.size() - state.answerFrom;
      std::vector<double> row(static_cast<size_t>(config_.vocabSize), -20.0);
      if (!script.empty()) {
        row[static_cast<size_t>(index < script.size() ? script[index] : endOfTurn_)] = 10.0;
      } else if (endAfter >= 0 && static_cast<int64_t>(index) >= endAfter) {
        row[static_cast<size_t>(endOfTurn_)] = 10.0;
      } else {
        const double last = state.tokens.back() % 97, length = static_cast<double>(state.tokens.size());
        for (int j = 0; j < 32; ++j) row[static_cast<size_t>(j)] = 3.0 * std::cos(0.7 * j + 1.3 * last + 0.1 * length);
      }
      out.push_back(tensor::tensor({1, config_.vocabSize}, row));
    }
    return out;
  }

  std::vector<TokenId> script;
  int64_t endAfter = -1;
  std::atomic<int> stepDelayMs{0};
  std::atomic<int> passes{0};
  std::atomic<int64_t> fed{0};  // tokens read, over all passes

 private:
  llm::ModelConfig config_;
  TokenId endOfTurn_;
};

inline std::string sharedData(const std::string& name) { return test_paths::sharedData() + "/" + name; }

/// The Qwen3 tokenizer and chat template around a ScriptModel.
struct TestModel {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<ScriptModel> fake;
  std::unique_ptr<llm::Model> model;

  TestModel() {
    // Read once for all tests (the vocabulary takes a second or two).
    static const std::string folder = sharedData("tokenizers/qwen3");
    static const auto shared = std::make_shared<const Tokenizer>(Tokenizer::fromJson(folder));
    static const std::string chatTemplate =
        nlohmann::json::parse(std::ifstream(folder + "/tokenizer_config.json")).value("chat_template", "");
    tokenizer = shared;
    fake = std::make_shared<ScriptModel>(static_cast<int64_t>(tokenizer->vocabSize()), tokenizer->tokenToId("<|im_end|>"));
    model = std::make_unique<llm::Model>(fake, tokenizer, chatTemplate);
  }
  void setScript(const std::string& text) { fake->script = tokenizer->encode(text, false); }
  Served served(const std::string& name, int slots, int64_t context) const {
    return Served{name, *model, model->engine(slots, context)};
  }
};

// ---- the client ----

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // chunked bodies decoded
  nlohmann::json json() const { return nlohmann::json::parse(body); }
  /// The data of each Server-Sent Event.
  std::vector<std::string> events() const {
    std::vector<std::string> out;
    size_t at = 0;
    while (at < body.size()) {
      const size_t end = body.find("\n\n", at);
      const std::string event = body.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
      if (end == std::string::npos) break;
      at = end + 2;
    }
    return out;
  }
};

/// receiveBuffer > 0: the client's SO_RCVBUF (small: the server's answers soon wait for it).
inline int connectTo(int port, int receiveBuffer = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (receiveBuffer > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receiveBuffer, sizeof receiveBuffer);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool sendText(int fd, const std::string& data) {
  size_t at = 0;
  while (at < data.size()) {
    const ssize_t n = ::send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

/// Everything the server sends until it closes (or timeoutMs passes without a byte).
inline std::string readAll(int fd, int timeoutMs = 10000) {
  std::string out;
  char buffer[8192];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeoutMs) <= 0) break;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

/// Splits raw response bytes (one response) into status, headers and the decoded body.
inline Response parseResponse(const std::string& raw) {
  Response r;
  const size_t headEnd = raw.find("\r\n\r\n");
  if (raw.size() < 12 || headEnd == std::string::npos) return r;
  r.status = std::stoi(raw.substr(9, 3));
  size_t at = raw.find("\r\n") + 2;
  while (at < headEnd) {
    const size_t end = raw.find("\r\n", at);
    const std::string line = raw.substr(at, end - at);
    const size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = line.substr(std::min(line.size(), colon + 2));
    at = end + 2;
  }
  std::string body = raw.substr(headEnd + 4);
  if (r.headers.count("transfer-encoding") && r.headers.at("transfer-encoding") == "chunked") {
    std::string decoded;
    size_t pos = 0;
    for (;;) {
      const size_t lineEnd = body.find("\r\n", pos);
      if (lineEnd == std::string::npos) break;
      const size_t size = std::stoul(body.substr(pos, lineEnd - pos), nullptr, 16);
      if (size == 0) break;
      decoded += body.substr(lineEnd + 2, size);
      pos = lineEnd + 2 + size + 2;
    }
    body = decoded;
  }
  r.body = body;
  return r;
}

/// One request on its own connection (Connection: close).
inline Response call(int port, const std::string& method, const std::string& path, const std::string& body = "",
                     const std::string& extraHeaders = "") {
  const int fd = connectTo(port);
  if (fd < 0) return {};
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extraHeaders;
  if (!body.empty() || method == "POST")
    request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  request += "\r\n" + body;
  sendText(fd, request);
  const std::string raw = readAll(fd);
  ::close(fd);
  return parseResponse(raw);
}

inline Response post(int port, const std::string& path, const nlohmann::json& body) {
  return call(port, "POST", path, body.dump());
}

/// Expects POST path with body to give `status` with OpenAI's error object: an
/// invalid_request_error whose param is `param` and whose message says `says`.
inline void expectOpenAiError(int port, const std::string& path, const nlohmann::json& body, const std::string& param,
                              const std::string& says, int status = 400) {
  const Response r = post(port, path, body);
  EXPECT_EQ(r.status, status) << body.dump() << " -> " << r.body;
  const nlohmann::json error = nlohmann::json::parse(r.body, nullptr, false)["error"];
  EXPECT_EQ(error["type"], "invalid_request_error") << r.body;
  EXPECT_EQ(error["param"], param) << r.body;
  EXPECT_NE(error["message"].get<std::string>().find(says), std::string::npos) << r.body;
}

/// Raw bytes to the server; what it answers before closing.
inline std::string rawExchange(int port, const std::string& bytes, int timeoutMs = 10000) {
  const int fd = connectTo(port);
  if (fd < 0) return "";
  sendText(fd, bytes);
  const std::string raw = readAll(fd, timeoutMs);
  ::close(fd);
  return raw;
}

}  // namespace gizml::ai::servetest
