#pragma once
// Shared helpers of the LLM tests: fixture paths, fresh temporary folders, error checks.
#include <gizml/error.h>
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/temporary.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>
#include "common/test_paths.h"

inline std::string llmData(const std::string& name) { return test_paths::testData() + "/llm/" + name; }

/// An empty temporary folder (gizml::test::temporary: removed when the process exits), unique to
/// the running test.
inline std::string freshFolder(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name() + "_" + tag;
  std::replace(name.begin(), name.end(), '/', '_');  // parameterized tests' names: one folder, not nested ones
  const std::filesystem::path p = gizml::test::temporary(name);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

/// A request for `limit` tokens after `prompt`.
inline gizml::llm::Request request(std::vector<gizml::llm::TokenId> prompt, int64_t limit,
                                   gizml::llm::Sampling sampling = gizml::llm::greedy()) {
  gizml::llm::Request r;
  r.prompt = std::move(prompt);
  r.limit = limit;
  r.sampling = sampling;
  return r;
}
