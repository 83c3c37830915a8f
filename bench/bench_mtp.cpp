// Decode speed with Qwen 3.5's MTP drafts against the same engine without them, in one run, on
// the tiny qwen3_5 fixture with an MTP layer built to agree with the model (tests/llm/
// mtp_fixture.h: every draft is kept once the model cycles through tokens it has read) and with a
// random one (no draft is kept: the cost of drafting). One slot, greedy. Run from the repository
// root: build/release/bench/bench_mtp
#include <gizml/llm.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../tests/llm/mtp_fixture.h"
#include "llm/language_model.h"
#include "llm/quant/converted_model.h"

namespace fs = std::filesystem;
using namespace gizml::llm;

namespace {

std::shared_ptr<LanguageModel> build(bool agreeing) {
  const fs::path root = fs::temp_directory_path() / ("gizml_bench_mtp_" + std::to_string(agreeing));
  fs::remove_all(root);
  fs::create_directories(root / "hf");
  writeQwen35WithMtp("tests/data/models/qwen3_5", (root / "hf").string(), agreeing);
  convert((root / "hf").string(), (root / "model").string(), Bits{.layers = 8, .head = 8, .group = 256});
  return buildLanguageModel(ConvertedModel::open((root / "model").string()));
}

struct Run {
  double tokensPerSecond;
  int64_t drafted, accepted;
};

Run decode(const std::shared_ptr<LanguageModel>& model, int drafts, const std::vector<TokenId>& prompt, int64_t n) {
  Run best{0, 0, 0};
  for (int pass = 0; pass < 5; ++pass) {
    Engine engine(model, nullptr, {}, 1, 1024);
    engine.setDrafts(drafts);
    Request r;
    r.prompt = prompt;
    r.limit = n;
    const auto start = std::chrono::steady_clock::now();
    const Result out = engine.generate({r})[0];
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (static_cast<double>(out.tokens.size()) / s > best.tokensPerSecond)
      best = {static_cast<double>(out.tokens.size()) / s, out.drafted, out.accepted};
  }
  return best;
}

}  // namespace

int main() {
  std::printf("%-10s %6s %10s %10s %8s\n", "MTP layer", "drafts", "tok/s", "kept", "speed-up");
  for (bool agreeing : {true, false}) {
    const std::shared_ptr<LanguageModel> model = build(agreeing);
    // A prompt that already holds the model's cycle, so the agreeing layer's guesses are read.
    std::vector<TokenId> prompt = {5, 17, 99};
    Engine warm(model, nullptr, {}, 1, 1024);
    Request r;
    r.prompt = prompt;
    r.limit = 64;
    const std::vector<TokenId> first = warm.generate({r})[0].tokens;
    prompt.insert(prompt.end(), first.begin(), first.end());
    const Run plain = decode(model, 0, prompt, 400);
    for (int drafts : {0, 1, 2, 4}) {
      const Run run = drafts == 0 ? plain : decode(model, drafts, prompt, 400);
      std::printf("%-10s %6d %10.0f %5lld/%-4lld %8.2f\n", agreeing ? "agreeing" : "random", drafts,
                  run.tokensPerSecond, static_cast<long long>(run.accepted), static_cast<long long>(run.drafted),
                  run.tokensPerSecond / plain.tokensPerSecond);
    }
  }
  return 0;
}
