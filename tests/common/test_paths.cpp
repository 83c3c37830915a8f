#include "test_paths.h"

namespace test_paths {

std::string testData(std::string_view rest) { return std::string(GIZML_TEST_DATA).append(rest); }
std::string sharedData(std::string_view rest) { return std::string(GIZML_SHARED_DATA).append(rest); }
std::string buildDir(std::string_view rest) { return std::string(GIZML_BUILD_DIR).append(rest); }

}  // namespace test_paths
