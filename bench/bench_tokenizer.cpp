// Encoding throughput of our tokenizers on the fixture corpus (tests/data/tokenizer), one
// document at a time on one thread, against the `tokenizers` package doing the same
// (bench/tokenizer_anchor.py). Run from the repository root:
//   build/release/bench/bench_tokenizer [python]
// where python defaults to .venv/bin/python.
#include <gizml/tokenizer.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../tests/tokenizer/fixtures.h"

namespace {

double oursMBps(const gizml::llm::Tokenizer& t, const std::vector<std::string>& docs, size_t bytes) {
  size_t ids = 0;
  for (const auto& d : docs) ids += t.encode(d, false).size();  // warm-up (word cache)
  double best = 1e30;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& d : docs) ids += t.encode(d, false).size();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return ids ? static_cast<double>(bytes) / best / 1e6 : 0;
}

std::map<std::string, double> anchor(const std::string& python) {
  std::map<std::string, double> out;
  const std::string command = python + " bench/tokenizer_anchor.py";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char name[64];
  double mbps;
  while (std::fscanf(pipe, "%63s %lf", name, &mbps) == 2) out[name] = mbps;
  pclose(pipe);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string python = argc > 1 ? argv[1] : ".venv/bin/python";
  const auto docs = tokenizer_fixtures::readCorpus("tests/data/tokenizer/corpus.bin");
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  std::printf("corpus: %zu documents, %.1f KB\n", docs.size(), static_cast<double>(bytes) / 1e3);
  std::map<std::string, double> ours;
  for (const char* name : {"qwen3", "llama3", "gemma3"}) {
    const auto t = gizml::llm::Tokenizer::fromJson(std::string("../shared/data/tokenizers/") + name);
    ours[name] = oursMBps(t, docs, bytes);
  }
  const auto theirs = anchor(python);
  std::printf("%-8s %12s %16s %8s\n", "model", "gizml MB/s", "tokenizers MB/s", "ratio");
  for (const auto& [name, mbps] : ours) {
    const auto it = theirs.find(name);
    if (it == theirs.end()) {
      std::printf("%-8s %12.2f %16s %8s\n", name.c_str(), mbps, "n/a", "n/a");
    } else {
      std::printf("%-8s %12.2f %16.2f %8.2f\n", name.c_str(), mbps, it->second, mbps / it->second);
    }
  }
  return 0;
}
