// Streaming a chat answer: reasoning, content and tool calls apart.
#include <gtest/gtest.h>

#include "ai/answer.h"

using namespace gizml;
using namespace gizml::ai;

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
