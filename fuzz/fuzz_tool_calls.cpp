// llm::toolCalls on arbitrary bytes as a model's answer: it never throws or reads past the text,
// every call it reads has a name and a JSON object for arguments, every block it leaves has its
// reason, and the server's stream reader (ai::AnswerStream), fed the text in two pieces cut
// anywhere, reads the same calls.
#include <gizml/llm.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "ai/answer.h"
#include "core/json_input.h"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gizml;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"s": {"type": "string"}, "n": {"type": "integer"}}}}}])");
  const llm::ToolCalls read = llm::toolCalls(text, tools);
  for (const llm::ToolCall& call : read.calls) {
    require(!call.name.empty());
    const auto arguments = tryParseJson(call.arguments);
    require(arguments && arguments->is_object());
  }
  for (const std::string& error : read.errors) require(error.rfind("the <tool_call> at byte ", 0) == 0);
  require(read.rest.size() <= text.size());
  // Text without a block is all rest; with one, each block is a call or an error.
  if (text.find("<tool_call>") == std::string_view::npos) require(read.calls.empty() && read.errors.empty());
  else require(!read.calls.empty() || !read.errors.empty());

  ai::AnswerStream stream(false, tools, false);
  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  std::vector<llm::ToolCall> streamed;
  for (ai::AnswerStream::Delta d : {stream.push(text.substr(0, cut)), stream.push(text.substr(cut)), stream.finish()})
    for (llm::ToolCall& c : d.calls) streamed.push_back(std::move(c));
  require(streamed == read.calls);
  return 0;
}
