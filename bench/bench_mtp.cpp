// Decode speed with Qwen 3.5's MTP drafts against the same engine without them, in one run, on
// the tiny qwen3_5 fixture with an MTP layer built to agree with the model (tests/llm/
// mtp_fixture.h: every draft is kept once the model cycles through tokens it has read) and with a
// random one (no draft is kept: the cost of drafting). One slot, greedy, every run to its limit.
// Through the public API (llm::load): the fixture has no tokenizer and load() needs one, so it
// gets Qwen3's (../shared/data/tokenizers), whose ends of turn lie outside the fixture's 512 ids,
// and its config loses eos_token_id (token 2, which the model with the random layer says within
// 400 tokens), so that no run ends at a turn's end. Run from the repository root:
//   build/release/bench/bench_mtp
#include <gizml/error.h>
#include <gizml/llm.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../tests/llm/mtp_fixture.h"

namespace fs = std::filesystem;
using namespace gizml::llm;

namespace {

Model build(bool agreeing) {
  const fs::path root = fs::temp_directory_path() / ("gizml_bench_mtp_" + std::to_string(agreeing));
  fs::remove_all(root);
  fs::create_directories(root / "hf");
  writeQwen35WithMtp("tests/data/models/qwen3_5", (root / "hf").string(), agreeing);
  const fs::path configPath = root / "hf" / "config.json";
  nlohmann::json config = nlohmann::json::parse(std::ifstream(configPath));
  config.erase("eos_token_id");
  std::ofstream(configPath) << config.dump();
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path("../shared/data/tokenizers/qwen3") / file, root / "hf" / file);
  convert((root / "hf").string(), (root / "model").string(), Bits{.layers = 8, .head = 8, .group = 256});
  return load((root / "model").string());
}

// The engine's tokens, all `limit` of them (the rates compare runs of the same length): an end of
// turn stops the bench.
Result generate(Engine& engine, const std::vector<TokenId>& prompt, int64_t limit) {
  Request r;
  r.prompt = prompt;
  r.limit = limit;
  Result out = engine.generate({r})[0];
  if (out.finish != Finish::Length)
    throw gizml::Error("bench_mtp: a run ended (" + std::string(finishName(out.finish)) + ") after " +
                       std::to_string(out.tokens.size()) + " of its " + std::to_string(limit) + " tokens");
  return out;
}

struct Run {
  double tokensPerSecond;
  int64_t drafted, accepted;
};

Run decode(const Model& model, int drafts, const std::vector<TokenId>& prompt, int64_t n) {
  Run best{0, 0, 0};
  for (int pass = 0; pass < 5; ++pass) {
    Engine engine = model.engine(1, 1024);
    engine.setDrafts(drafts);
    const auto start = std::chrono::steady_clock::now();
    const Result out = generate(engine, prompt, n);
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
    const Model model = build(agreeing);
    // A prompt that already holds the model's cycle, so the agreeing layer's guesses are read.
    std::vector<TokenId> prompt = {5, 17, 99};
    Engine warm = model.engine(1, 1024);
    const std::vector<TokenId> first = generate(warm, prompt, 64).tokens;
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
