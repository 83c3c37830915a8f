// llm::toolCalls and Model::calls on the real chat templates of ../shared/data/templates/: the
// calls a template writes are read back as they went in, whole and streamed at every cut (the
// server's AnswerStream), and broken calls stay text with a reason.
#include <gtest/gtest.h>

#include <gizml/chat_template.h>

#include <fstream>
#include <sstream>

#include "ai/answer.h"
#include "serve_fixture.h"
#include "common/read_file.h"

using namespace gizml;
using nlohmann::ordered_json;

namespace {

using testing_files::readFile;

std::string templateSource(const std::string& name) {
  return readFile(ai::servetest::sharedData("templates/" + name + ".jinja"));
}

// A model around a template (the Qwen3 tokenizer; a template needs no tokenizer of its own here).
llm::Model modelWith(const std::string& chatTemplate) {
  static ai::servetest::TestModel qwen;
  return llm::Model(qwen.fake, qwen.tokenizer, chatTemplate);
}

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "code": {"type": "string"}},
                   "required": ["city"]}}},
  {"type": "function", "function": {"name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"},
                   "filters": {"type": "object"}}}}}])");

// Two calls: a string that looks like a number ("007", typed by its schema), a value over lines,
// a number and an object.
const ordered_json kCalls = ordered_json::parse(R"([
  {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "code": "007"}}},
  {"id": "call00002", "type": "function", "function": {"name": "search",
    "arguments": {"query": "rivers\nof Europe", "limit": 5, "filters": {"lang": "en"}}}}])");

const char* kQuestion = "Weather in Paris, and rivers?";

// The assistant's turn with kCalls as the template writes it: the rendering after the question.
std::string writtenCalls(const std::string& chatTemplate) {
  const ordered_json messages = {{{"role", "user"}, {"content", kQuestion}},
                                 {{"role", "assistant"}, {"content", ""}, {"tool_calls", kCalls}}};
  const std::string text = llm::ChatTemplate::parse(chatTemplate)
                               .renderChat(messages, kTools, false, {{"bos_token", ""}, {"eos_token", ""}});
  const size_t at = text.rfind(kQuestion);
  EXPECT_NE(at, std::string::npos) << text;
  return text.substr(at + std::string(kQuestion).size());
}

void expectTheCalls(const std::vector<llm::ToolCall>& calls, const std::string& text) {
  ASSERT_EQ(calls.size(), kCalls.size()) << text;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].name, kCalls[i]["function"]["name"]) << text;
    EXPECT_EQ(ordered_json::parse(calls[i].arguments), kCalls[i]["function"]["arguments"]) << text;
  }
}

// What the server's stream reader gives for text sent in the given pieces.
struct Streamed {
  std::string content;
  std::vector<llm::ToolCall> calls;
};
Streamed stream(const std::vector<std::string_view>& pieces) {
  ai::AnswerStream s(true, kTools, false);
  Streamed out;
  const auto add = [&](ai::AnswerStream::Delta d) {
    out.content += d.content;
    for (llm::ToolCall& c : d.calls) out.calls.push_back(std::move(c));
  };
  for (std::string_view p : pieces) add(s.push(p));
  add(s.finish());
  EXPECT_EQ(out.calls, s.calls());
  return out;
}

}  // namespace

TEST(ModelCalls, TheFormatEachRealTemplateWrites) {
  const std::vector<std::pair<std::string, llm::CallFormat>> expected = {
      {"Qwen-Qwen2.5-7B-Instruct", llm::CallFormat::Json},
      {"Qwen-Qwen3-0.6B", llm::CallFormat::Json},
      {"Qwen3-Coder", llm::CallFormat::Function},
      {"Qwen3.5-4B", llm::CallFormat::Function},
      {"meta-llama-Llama-3.1-8B-Instruct", llm::CallFormat::Other},
      {"mistralai-Mistral-Nemo-Instruct-2407", llm::CallFormat::Other},
  };
  for (const auto& [name, format] : expected)
    EXPECT_EQ(llm::callFormatName(modelWith(templateSource(name)).calls()), std::string(llm::callFormatName(format)))
        << name;
  // Gemma 3's template knows no tools; a model without a template writes none.
  const ordered_json gemma =
      nlohmann::json::parse(readFile(ai::servetest::sharedData("tokenizers/gemma3/tokenizer_config.json")))["chat_template"];
  EXPECT_EQ(modelWith(gemma.get<std::string>()).calls(), llm::CallFormat::None);
  EXPECT_EQ(modelWith("").calls(), llm::CallFormat::None);
}

TEST(ToolCalls, ReadsBackWhatEachTemplateWrote) {
  for (const char* name : {"Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "Qwen3-Coder", "Qwen3.5-4B"}) {
    const std::string text = writtenCalls(templateSource(name));
    const llm::ToolCalls read = llm::toolCalls(text, kTools);
    expectTheCalls(read.calls, text);
    EXPECT_TRUE(read.errors.empty()) << name << ": " << read.errors.front();
    // What is left is the template's turn markup, no call.
    EXPECT_EQ(read.rest.find("tool_call"), std::string::npos) << name << ": " << read.rest;
  }
}

TEST(ToolCalls, StreamedCutAtEveryByteGiveTheSameCalls) {
  for (const char* name : {"Qwen-Qwen2.5-7B-Instruct", "Qwen3.5-4B"}) {
    // The model's answer: some words, then the calls as the template writes them (to its turn end).
    std::string text = writtenCalls(templateSource(name));
    text = "Let me look.\n" + text.substr(text.find("<tool_call>"), text.rfind("</tool_call>") + 12 - text.find("<tool_call>"));
    const std::vector<llm::ToolCall> whole = llm::toolCalls(text, kTools).calls;
    expectTheCalls(whole, text);
    const std::string_view all(text);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      const Streamed s = stream({all.substr(0, cut), all.substr(cut)});
      EXPECT_EQ(s.calls, whole) << name << " cut at " << cut;
      EXPECT_EQ(s.content, "Let me look.\n") << name << " cut at " << cut;
    }
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < text.size(); ++i) bytes.push_back(all.substr(i, 1));
    EXPECT_EQ(stream(bytes).calls, whole) << name << " byte by byte";
  }
}

TEST(ToolCalls, BrokenCallsStayTextWithTheirReason) {
  const std::vector<std::pair<std::string, std::string>> broken = {
      {"<tool_call>\n{not json}\n</tool_call>", "not JSON"},
      {"<tool_call>{\"arguments\": {}}</tool_call>", "no \"name\""},
      {"<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>", "\"arguments\" are not an object"},
      {"<tool_call>[1, 2]</tool_call>", "neither a JSON object nor <function=NAME>"},
      {"<tool_call>\n</tool_call>", "empty"},
      {"<tool_call><function=>\n</function></tool_call>", "names no function"},
      {"<tool_call><function=f</tool_call>", "<function= has no '>'"},
      {"<tool_call><function=f><parameter=p</function></tool_call>", "<parameter= has no '>'"},
      {"<tool_call><function=f><parameter=>1</parameter></function></tool_call>", "names no parameter"},
  };
  for (const auto& [text, reason] : broken) {
    const llm::ToolCalls read = llm::toolCalls("Before. " + text + " After.");
    EXPECT_TRUE(read.calls.empty()) << text;
    EXPECT_EQ(read.rest, "Before. " + text + " After.");
    ASSERT_EQ(read.errors.size(), 1u) << text;
    EXPECT_NE(read.errors[0].find(reason), std::string::npos) << read.errors[0];
    EXPECT_NE(read.errors[0].find("at byte 8"), std::string::npos) << read.errors[0];
  }
  // A good call beside a broken one is read; an unclosed last one (the turn ended) too.
  const llm::ToolCalls mixed = llm::toolCalls(
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call><tool_call>{oops}</tool_call>"
      "<tool_call>\n<function=g>\n<parameter=y>\ntwo");
  ASSERT_EQ(mixed.calls.size(), 2u);
  EXPECT_EQ(mixed.calls[0], (llm::ToolCall{"f", "{\"x\":1}"}));
  EXPECT_EQ(mixed.calls[1], (llm::ToolCall{"g", "{\"y\":\"two\"}"}));
  EXPECT_EQ(mixed.rest, "<tool_call>{oops}</tool_call>");
  EXPECT_EQ(mixed.errors.size(), 1u);
}

TEST(ToolCalls, EveryPrefixOfACallReadsWithoutThrowing) {
  // A turn cut anywhere (the token limit): never an exception, at most the calls of the whole,
  // and every block that is not read has its reason.
  const std::string text = writtenCalls(templateSource("Qwen3.5-4B")) + writtenCalls(templateSource("Qwen-Qwen3-0.6B"));
  const size_t wholeCalls = llm::toolCalls(text, kTools).calls.size();
  ASSERT_EQ(wholeCalls, 4u);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const std::string_view prefix = std::string_view(text).substr(0, cut);
    llm::ToolCalls read;
    ASSERT_NO_THROW(read = llm::toolCalls(prefix, kTools)) << cut;
    EXPECT_LE(read.calls.size(), wholeCalls);
    size_t blocks = 0;
    for (size_t at = prefix.find("<tool_call>"); at != std::string_view::npos; at = prefix.find("<tool_call>", at + 1)) ++blocks;
    EXPECT_EQ(read.calls.size() + read.errors.size(), blocks) << cut;
  }
}
