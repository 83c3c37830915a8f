// Every chat template on every conversation of tests/data/templates, against Python jinja2's
// renderings (tests/reference/make_template_fixtures.py): byte-identical text, or an error where
// Python raised one (with raise_exception's exact message).
#include <gizml/chat_template.h>
#include <gizml/error.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "common/read_file.h"
#include "common/test_paths.h"

namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

using testing_files::readFile;

// The template sources, by fixture file name, as the fixture script found them.
std::string templateSource(const std::string& file) {
  const fs::path shared = test_paths::sharedData();
  if (file.rfind("tokenizer-", 0) == 0) {
    const std::string name = file.substr(10, file.size() - 10 - 6);
    return ordered_json::parse(readFile(shared / "tokenizers" / name / "tokenizer_config.json"))["chat_template"];
  }
  return readFile(shared / "templates" / file);
}

TEST(TemplateReference, MatchesJinja2OnEveryConversation) {
  const fs::path dir = fs::path(test_paths::testData()) / "templates";
  std::map<std::string, ordered_json> contexts;
  for (const auto& c : ordered_json::parse(readFile(dir / "conversations.json"))) contexts[c["name"]] = c["context"];
  ASSERT_GE(contexts.size(), 30u);

  int passed = 0, total = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().filename() == "conversations.json") continue;
    const ordered_json doc = ordered_json::parse(readFile(entry.path()));
    const std::string file = doc["template"];
    const gizml::llm::ChatTemplate t = gizml::llm::ChatTemplate::parse(templateSource(file));
    for (const auto& c : doc["cases"]) {
      const std::string name = c["conversation"];
      SCOPED_TRACE(file + " x " + name);
      ++total;
      const ordered_json& context = contexts.at(name);
      if (c.contains("output")) {
        try {
          const std::string got = t.render(context);
          EXPECT_EQ(got, c["output"].get<std::string>());
          passed += got == c["output"].get<std::string>();
        } catch (const gizml::Error& e) {
          ADD_FAILURE() << "unexpected error: " << e.what();
        }
      } else {
        try {
          t.render(context);
          ADD_FAILURE() << "expected an error like: " << c["error"].get<std::string>();
        } catch (const gizml::Error& e) {
          if (c.value("raised", false)) {
            EXPECT_EQ(std::string(e.what()), c["error"].get<std::string>());
            passed += std::string(e.what()) == c["error"].get<std::string>();
          } else {
            ++passed;
          }
        }
      }
    }
  }
  EXPECT_GE(total, 6 * 30);
  EXPECT_EQ(passed, total);
  std::cout << passed << " of " << total << " template x conversation cases match jinja2\n";
}

}  // namespace
