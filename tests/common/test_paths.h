#pragma once
// Where the tests find their data and the build folder: absolute paths fixed when CMake configured
// this checkout. They are compiled into one small object (test_paths.cpp) and not into every test's
// command line, so that ccache reuses the other test objects in a clone in another folder (CI's).
#include <string>
#include <string_view>

namespace test_paths {

// tests/data followed by `rest` (which starts with '/' when given).
std::string testData(std::string_view rest = {});
// ../shared/data (the real test data beside the checkout) followed by `rest`.
std::string sharedData(std::string_view rest = {});
// The CMake build folder followed by `rest`.
std::string buildDir(std::string_view rest = {});

}  // namespace test_paths
