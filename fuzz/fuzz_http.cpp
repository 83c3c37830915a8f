// gizml::ai's HTTP request parser on arbitrary bytes, as pipelined requests on one connection,
// and the answer parser (reasoning, tool calls) on the same bytes: nothing may crash or read
// past the input, and the parser's answers must agree with themselves: a request that parses
// whole parses the same from exactly its own bytes, and every shorter prefix of it is only
// incomplete (never an error), so a connection never rejects a request that is still arriving.
// Each request that parses also goes through the access rules (CORS, the API key), which must
// answer it with a well-formed response or pass it on.
#include <gizml/ai.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ai/access.h"
#include "ai/answer.h"
#include "ai/http.h"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gizml::ai;
  http::Limits limits;
  limits.requestLine = 256;  // small limits so that inputs reach them
  limits.headerBytes = 1024;
  limits.headerCount = 8;
  limits.body = 4096;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int requests = 0; requests < 16 && !rest.empty(); ++requests) {
    http::Request r;
    const http::Parse p = http::parseRequest(rest, limits, r);
    if (p.kind == http::Parse::Error) {
      require(p.status >= 400 && p.status < 600 && !p.message.empty());
      break;
    }
    if (p.kind == http::Parse::Incomplete) break;
    require(p.consumed > 0 && p.consumed <= rest.size());
    require(r.body.size() <= limits.body && r.headers.size() <= limits.headerCount);
    http::Request again;
    const http::Parse whole = http::parseRequest(rest.substr(0, p.consumed), limits, again);
    require(whole.kind == http::Parse::Complete && whole.consumed == p.consumed && again.body == r.body &&
            again.target == r.target);
    for (size_t cut : {p.consumed / 2, p.consumed - 1}) {
      http::Request part;
      require(http::parseRequest(rest.substr(0, cut), limits, part).kind == http::Parse::Incomplete);
    }
    static const Access access({{"https://app.example", "*"}, "sk-key"});
    for (const bool keepAlive : {false, true}) {
      const std::optional<std::string> answer = access.answer(r, keepAlive);
      require(!answer || (answer->rfind("HTTP/1.1 ", 0) == 0 && answer->find("\r\n\r\n") != std::string::npos));
    }
    for (const auto& [name, value] : access.corsHeaders(r))
      require(value.find_first_of("\r\n") == std::string::npos);
    rest.remove_prefix(p.consumed);
  }

  // The same bytes as a model's answer, streamed in two pieces: the pieces add up to the whole.
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"s": {"type": "string"}, "n": {"type": "integer"}}}}}])");
  const Answer whole = parseAnswer(text, tools, size % 2 == 1);
  AnswerStream stream(true, tools, size % 2 == 1);
  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  std::string reasoning, content;
  for (const AnswerStream::Delta& d : {stream.push(text.substr(0, cut)), stream.push(text.substr(cut)), stream.finish()}) {
    reasoning += d.reasoning;
    content += d.content;
  }
  require(reasoning == whole.reasoning && content == whole.content && stream.calls().size() == whole.calls.size());
  return 0;
}
