// llama.cpp's tokenizer test cases (inputs separated by a line __ggml_vocab_test__, one line of
// ids per case): Qwen3's tokenizer.json against the qwen2 cases, and the LLaMA SentencePiece GGUF.
#include <gizml/tokenizer.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/read_file.h"
#include "common/test_paths.h"

namespace {

using gizml::llm::TokenId;
using gizml::llm::Tokenizer;

using testing_files::readFile;

struct Case {
  std::string text;
  std::vector<TokenId> ids;
};

std::vector<Case> readCases(const std::string& stem) {
  const std::string inp = readFile(stem + ".inp");
  const std::string delimiter = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t start = 0, end; (end = inp.find(delimiter, start)) != std::string::npos;
       start = end + delimiter.size())
    cases.push_back({inp.substr(start, end - start), {}});
  std::istringstream out(readFile(stem + ".out"));
  std::string line;
  for (Case& c : cases) {
    EXPECT_TRUE(std::getline(out, line));
    std::istringstream ids(line);
    for (TokenId id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

void expectCases(const Tokenizer& tokenizer, const std::string& stem) {
  const std::vector<Case> cases = readCases(stem);
  ASSERT_EQ(cases.size(), 46u);
  for (const Case& c : cases) {
    const std::vector<TokenId> ids = tokenizer.encode(c.text, false);
    EXPECT_EQ(ids, c.ids) << "text: [" << c.text << "]";
    EXPECT_EQ(tokenizer.decode(ids), c.text);
  }
}

TEST(TokenizerCases, Qwen3JsonGivesLlamaCppQwen2Ids) {
  const Tokenizer t = Tokenizer::fromJson(test_paths::sharedData("/tokenizers/qwen3"));
  expectCases(t, test_paths::sharedData("/tokenizer-tests/qwen2"));
}

TEST(TokenizerCases, LlamaSpmGgufGivesLlamaCppIds) {
  const Tokenizer t = Tokenizer::fromGguf(test_paths::sharedData("/tokenizer-tests/llama-spm.gguf"));
  expectCases(t, test_paths::sharedData("/tokenizer-tests/llama-spm"));
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.encode("Hello", true), (std::vector<TokenId>{1, 15043}));
}

}  // namespace
