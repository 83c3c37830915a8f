// The whole request path on arbitrary bytes: a real gizml::ai::Server, started once in process on
// 127.0.0.1 (an ephemeral port) with a scripted model on the Qwen3 tokenizer and template, gets
// each input on a fresh connection: HTTP -> JSON -> OpenAI request -> schema/grammar -> template
// -> the model's answer (a reasoning section and a tool call, parsed back); chats with pictures
// (image_url data URLs) on "seeing", the scripted model on Qwen3.5's template with the tiny Qwen 3.5
// vision tower of tests/data/models/qwen3_5_vl (data URL, base64, decoding, the tower, the
// placeholders; the model ignores the rows); and the images routes
// on the tiny Z-Image and the tiny klein of tests/data/diffusion (pictures up to 32 x 32, so that
// a valid request paints in milliseconds): POST /v1/images/edits' multipart forms come as raw
// bytes (seeds in fuzz/corpus/fuzz_server whose first byte is 0). Driven through the socket, so that whatever the transport becomes
// inside, this stays the client's view.
// The first byte chooses: the rest as raw bytes, or as the JSON body of a POST to a route.
// Nothing may crash or hang; every complete request is answered, never with a 5xx.
// Run from the repository root: build/fuzz/fuzz/fuzz_server -max_total_time=600 NEW fuzz/corpus/fuzz_server
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "../tests/common/test_paths.h"
#include "../tests/ai/serve_fixture.h"
#include "../tests/diffusion/klein_tiny.h"
#include "../tests/diffusion/zimage_tiny.h"

namespace {

using namespace gizml;
using namespace gizml::ai::servetest;

// Stops the run on a broken promise, showing what the server answered.
void require(bool condition, const std::string& answer) {
  if (condition) return;
  std::fprintf(stderr, "the server answered (%zu bytes):\n%.2000s\n", answer.size(), answer.c_str());
  std::abort();
}

// The scripted model with a vision tower, on a template that writes a placeholder for each picture.
ai::Served seeing(const TestModel& test) {
  auto tower = std::make_shared<const vision::Tower>(vision::Tower::load(test_paths::testData("/models/qwen3_5_vl/hf")));
  auto fake = std::make_shared<ScriptModel>(static_cast<int64_t>(test.tokenizer->vocabSize()),
                                            test.tokenizer->tokenToId("<|im_end|>"), tower->config().outHidden);
  std::ifstream file(test_paths::sharedData("/templates/Qwen3.5-4B.jinja"));
  const llm::Model model(fake, test.tokenizer, std::string(std::istreambuf_iterator<char>(file), {}));
  return {"seeing", model, model.engine(1, 256), tower};
}

struct Fixture {
  TestModel test;
  std::unique_ptr<ai::Server> server;
  Fixture() {
    // A short answer the answer parser has work in: reasoning, then a call of the tool "f".
    test.setScript("<think>\nhm\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, \"x\"]}}\n</tool_call>");
    ai::ServeOptions options;
    options.port = 0;
    options.requestTimeoutMs = 2000;
    options.picturePixels = 65536;  // the tower's least: every picture reads in milliseconds
    std::vector<ai::Served> served;
    served.push_back(test.served("fake", 1, 96));  // a small context bounds each answer's length
    served.push_back(seeing(test));
    std::vector<ai::ServedPainter> painters;
    painters.push_back({"tiny", test::zimage::pipeline(), 32});
    painters.push_back({"klein", test::klein::pipeline(), 32});
    server = std::make_unique<ai::Server>(std::move(served), std::move(painters), ai::Listener("127.0.0.1", 0), options);
  }
};

// Everything the server sends until it closes; false when it has not closed within the bound.
bool answerOf(int fd, std::string& out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  char buffer[8192];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return true;
    out.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture served;
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const char* const routes[] = {nullptr, "/v1/chat/completions", "/v1/completions", "/v1/images/generations"};
  const char* route = routes[data[0] % 4];
  std::string bytes = rest;
  if (route)
    bytes = std::string("POST ") + route + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
            "Content-Length: " + std::to_string(rest.size()) + "\r\nConnection: close\r\n\r\n" + rest;

  const int fd = connectTo(served.server->port());
  require(fd >= 0, "(no connection)");
  sendText(fd, bytes);  // the server may answer (and close) before reading it all
  // Raw bytes may be an unfinished request: the end of our side ends it. (Not for a whole
  // request: the server takes a half-closed connection for a client gone and cancels.)
  if (!route) ::shutdown(fd, SHUT_WR);
  std::string answer;
  const bool closed = answerOf(fd, answer);
  ::close(fd);
  require(closed, answer);  // no request hangs the server
  if (route) {
    // A whole request: answered, and a bad body is the client's fault (4xx), never a 5xx.
    const Response r = parseResponse(answer);
    require(r.status >= 200 && r.status < 500, answer);
  }
  return 0;
}
