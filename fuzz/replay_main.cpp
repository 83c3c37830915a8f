// Replays fuzz inputs without libFuzzer, so that the committed corpora run as regression tests in
// every build (under ASan+UBSan in the sanitize preset): calls LLVMFuzzerTestOneInput on every
// file of the folders (or the files) given and reports how many ran.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional, as in libFuzzer: targets that load tables once define it.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputsOf(const fs::path& arg) {
  std::vector<fs::path> files;
  if (!fs::is_directory(arg)) {
    files.push_back(arg);
    return files;
  }
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(arg)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());  // the same order on every machine
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    if (!fs::exists(argv[i])) {
      std::fprintf(stderr, "%s: no such file or folder\n", argv[i]);
      return 1;
    }
    for (const fs::path& path : inputsOf(argv[i])) {
      std::ifstream in(path, std::ios::binary);
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      // An exactly sized heap copy, as libFuzzer passes, so ASan sees reads past the end.
      const std::unique_ptr<uint8_t[]> data(new uint8_t[bytes.size()]);
      std::copy(bytes.begin(), bytes.end(), data.get());
      // Named before running, so that a crash's log ends with the input that caused it.
      std::fprintf(stderr, "%s\n", path.c_str());
      LLVMFuzzerTestOneInput(data.get(), bytes.size());
      ++count;
    }
  }
  std::printf("%zu inputs ran\n", count);
  return count > 0 ? 0 : 1;
}
