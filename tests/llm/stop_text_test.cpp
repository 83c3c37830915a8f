// The engine's text of a request: stop strings held back and cut, whole UTF-8 characters only.
#include <gtest/gtest.h>

#include "llm/engine/stop_text.h"
#include "common/test_paths.h"

using namespace gizml::llm;

namespace {

const Tokenizer& qwen3() {
  static const Tokenizer t = Tokenizer::fromJson(test_paths::sharedData() + "/tokenizers/qwen3");
  return t;
}

// The pieces a StopText gives for the tokens of text, one at a time, and at the end.
std::vector<std::string> pieces(const std::string& text, std::vector<std::string> stops, bool* stopped = nullptr) {
  StopText stream(qwen3(), std::move(stops));
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

TEST(StopText, CutsAtTheFirstStopAndNeverGivesItsStart) {
  bool stopped = false;
  const std::vector<std::string> out = pieces("Hello world, and END of it", {"END", "xyz"}, &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(joined(out), "Hello world, and ");
  // Nothing given ever ends with a prefix of a stop string it later completes.
  std::string sent;
  for (const std::string& p : out) {
    sent += p;
    EXPECT_EQ(sent.find("EN"), std::string::npos);
  }
  EXPECT_EQ(joined(pieces("no stop here", {"STOP"}, &stopped)), "no stop here");
  EXPECT_FALSE(stopped);
  // A held-back start that does not complete is given at the end.
  EXPECT_EQ(joined(pieces("ends with ST", {"STOP"})), "ends with ST");
}

TEST(StopText, NeverSplitsACharacter) {
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
