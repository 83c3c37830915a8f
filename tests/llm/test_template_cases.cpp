// The differential test against Python jinja2: thousands of generated templates (every filter,
// test, operator and sandbox-allowed method on operands of every kind, non-string dict keys,
// none/undefined operands, Markup, unknown names in branches, statements, whitespace control;
// made by tests/reference/make_template_cases.py in transformers' environment). Ours must render
// each byte for byte as jinja2 did, and raise a gizml::Error wherever jinja2 raised.
#include <gizml/chat_template.h>
#include <gizml/error.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include "common/test_paths.h"

namespace {

using nlohmann::ordered_json;

ordered_json readJson(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str());
}

TEST(TemplateCases, MatchJinja2ByteForByte) {
  const ordered_json doc = readJson(std::filesystem::path(test_paths::testData()) / "templates" / "generated" / "cases.json");
  const ordered_json& context = doc["context"];
  int total = 0, rendered = 0, raised = 0, failures = 0;
  for (const ordered_json& c : doc["cases"]) {
    const std::string source = c["template"];
    ++total;
    std::string got, error;
    try {
      got = gizml::llm::ChatTemplate::parse(source).render(context);
    } catch (const gizml::Error& e) {
      error = e.what();
      EXPECT_FALSE(error.empty()) << source;
    }
    const bool ok = c.contains("output") ? error.empty() && got == c["output"].get<std::string>() : !error.empty();
    if (ok) {
      c.contains("output") ? ++rendered : ++raised;
      continue;
    }
    ++failures;
    ADD_FAILURE() << "template: " << source << "\n  jinja2: "
                  << (c.contains("output") ? "'" + c["output"].get<std::string>() + "'" : "raises " + c["error"].get<std::string>())
                  << "\n  ours:   " << (error.empty() ? "'" + got + "'" : "raises " + error);
  }
  EXPECT_GT(total, 3000);
  EXPECT_EQ(failures, 0);
  std::cout << total << " generated templates: " << rendered << " rendered identically, " << raised
            << " raised as jinja2 does, " << failures << " differ\n";
}

}  // namespace
