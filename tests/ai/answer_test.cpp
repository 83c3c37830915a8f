// Streaming text: UTF-8 and stop strings held back; reasoning, content and tool calls apart.
#include <gtest/gtest.h>

#include "ai/answer.h"
#include "serve_fixture.h"

using namespace gizml;
using namespace gizml::ai;

namespace {

const Tokenizer& qwen3() {
  static const Tokenizer t = Tokenizer::fromJson(servetest::sharedData("tokenizers/qwen3"));
  return t;
}

// The pieces a TextStream sends for the tokens of text, one at a time, and at the end.
std::vector<std::string> pieces(const std::string& text, std::vector<std::string> stops, bool* stopped = nullptr) {
  TextStream stream(qwen3(), std::move(stops));
  std::vector<std::string> out;
  for (TokenId id : qwen3().encode(text, false)) out.push_back(stream.push(id));
  out.push_back(stream.finish());
  if (stopped) *stopped = stream.stopped();
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& p : parts) s += p;
  return s;
}

}  // namespace

TEST(TextStream, CutsAtTheFirstStopAndNeverSendsItsStart) {
  bool stopped = false;
  const std::vector<std::string> out = pieces("Hello world, and END of it", {"END", "xyz"}, &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(joined(out), "Hello world, and ");
  // Nothing sent ever ends with a prefix of a stop string it later completes.
  std::string sent;
  for (const std::string& p : out) {
    sent += p;
    EXPECT_EQ(sent.find("EN"), std::string::npos);
  }
  EXPECT_EQ(joined(pieces("no stop here", {"STOP"}, &stopped)), "no stop here");
  EXPECT_FALSE(stopped);
  // A held-back start that does not complete is sent at the end.
  EXPECT_EQ(joined(pieces("ends with ST", {"STOP"})), "ends with ST");
}

TEST(TextStream, NeverSplitsACharacter) {
  const std::string text = "día 你好 🎉 ok";
  for (const std::string& p : pieces(text, {})) {
    // Each piece is whole UTF-8: it does not begin with a continuation byte.
    if (!p.empty()) {
      EXPECT_NE(static_cast<unsigned char>(p[0]) & 0xC0, 0x80) << p;
    }
  }
  EXPECT_EQ(joined(pieces(text, {})), text);
  EXPECT_EQ(joined(pieces(text, {"🎉"})), "día 你好 ");
}

TEST(HeldBack, LongestSuffixStartingAMarker) {
  EXPECT_EQ(heldBack("abc<tool", {"<tool_call>"}), 5u);
  EXPECT_EQ(heldBack("abc<", {"<tool_call>", "<think>"}), 1u);
  EXPECT_EQ(heldBack("abc", {"<tool_call>"}), 0u);
  EXPECT_EQ(heldBack("ab", {"b", "abc"}), 2u);
}

TEST(AnswerStream, SplitsReasoningFromContentAcrossAnySplit) {
  const std::string text = "<think>\nweigh it\n</think>\n\nThe answer.";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    AnswerStream s(true, nlohmann::ordered_json::array(), false);
    std::string reasoning, content;
    for (const AnswerStream::Delta& d : {s.push(text.substr(0, cut)), s.push(text.substr(cut)), s.finish()}) {
      reasoning += d.reasoning;
      content += d.content;
    }
    EXPECT_EQ(reasoning, "\nweigh it\n") << cut;
    EXPECT_EQ(content, "The answer.") << cut;
  }
}

TEST(AnswerStream, APromptThatOpenedThinkingStartsInReasoning) {
  const Answer a = parseAnswer("plan\n</think>\nDone.", nlohmann::ordered_json::array(), true);
  EXPECT_EQ(a.reasoning, "plan\n");
  EXPECT_EQ(a.content, "Done.");
}

TEST(ParseAnswer, JsonAndFunctionFormCalls) {
  const Answer a = parseAnswer(
      "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"g\", \"arguments\": \"{}\"}\n</tool_call>");
  EXPECT_EQ(a.content, "Sure.\n");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "f");
  EXPECT_EQ(a.calls[0].arguments, "{\"x\":1}");
  EXPECT_EQ(a.calls[1].name, "g");
  EXPECT_EQ(a.calls[1].arguments, "{}");

  const Answer b = parseAnswer(
      "<tool_call>\n<function=search>\n<parameter=query>\nrivers of Europe\n</parameter>\n"
      "<parameter=limit>\n5\n</parameter>\n<parameter=filters>\n{\"lang\": \"en\"}\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].name, "search");
  EXPECT_EQ(nlohmann::json::parse(b.calls[0].arguments),
            nlohmann::json({{"query", "rivers of Europe"}, {"limit", 5}, {"filters", {{"lang", "en"}}}}));
  EXPECT_TRUE(b.content.empty());
}

TEST(ParseAnswer, BrokenCallsStayInTheContent) {
  const Answer a = parseAnswer("<tool_call>\n{not json}\n</tool_call>");
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, "<tool_call>\n{not json}\n</tool_call>");
  const Answer unclosed = parseAnswer("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(unclosed.calls.size(), 1u);  // the turn ended before </tool_call>
  EXPECT_EQ(unclosed.calls[0].name, "f");
}
