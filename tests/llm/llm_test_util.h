#pragma once
// Shared helpers of the LLM tests: fixture paths, fresh temporary folders, error checks.
#include <gizml/error.h>
#include <gtest/gtest.h>

#include "common/expect_error.h"

#include <filesystem>
#include <string>

inline std::string llmData(const std::string& name) { return std::string(GIZML_TEST_DATA) + "/llm/" + name; }

/// An empty folder under the system's temporary directory, unique to the running test.
inline std::string freshFolder(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                  ("gizml_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + tag);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}
