// The engine's prefill budget (Engine::setPrefillBudget; issue 21, point 6): 4 greedy requests
// decode, then a 4,000-token prompt joins them. Prints the inter-token latency (p50, p99) of the
// 4 before the prompt, while it is read (until its first token) and after, and the prompt's time
// to first token, with the budget on and off in one run, and during/before p50 for both. Their
// steps slow down as their own contexts grow, so "pace" compares each run's steps while the
// prompt is read with the same steps of a control run in which no prompt joins. The
// prompt is bench/kl_text.txt's tokens repeated; end-of-turn tokens are banned (logit bias) so
// that no request ends early. Run from the repository root:
//   build/release/bench/bench_prefill_budget MODEL_FOLDER [THREADS]
// THREADS sets GIZML_THREADS (the library's threads) before the model loads.
#include <gizml/error.h>
#include <gizml/llm.h>
#include <gizml/threads.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace gizml::llm;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kDecoding = 4;
constexpr size_t kLongPrompt = 4000;
constexpr int kWarmSteps = 4;     // the decoders' prompts and first steps, not counted
constexpr int kBeforeSteps = 32;  // steps of the 4 alone before the long prompt joins
constexpr int kAfterSteps = 32;   // and after its first token

std::vector<TokenId> textTokens(const Model& model) {
  const std::string path = "bench/kl_text.txt";
  std::ifstream in(path);
  if (!in) throw gizml::Error("bench_prefill_budget: cannot read " + path + " (run from the repository root)");
  std::stringstream text;
  text << in.rdbuf();
  return model.tokenizer().encode(text.str(), false);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

struct Run {
  std::map<std::string, std::vector<double>> gaps;  // by phase: seconds between a request's tokens
  std::vector<double> steps;  // seconds of each step (after the warm ones)
  double timeToFirst = 0;
  int promptSteps = 0;  // steps from the long prompt's add to its first token
};

// With withPrompt false, the control: the decoding requests alone for `control` steps.
Run run(const Model& model, bool budget, const std::vector<TokenId>& text, bool withPrompt = true, int control = 0) {
  Engine engine = model.engine(kDecoding + 1, static_cast<int64_t>(kLongPrompt) + 64);
  engine.setPrefillBudget(budget);
  Sampling s = greedy();
  for (TokenId end : model.endOfTurn()) s.logitBias.push_back({end, -100.0f});
  std::vector<int> decoding;
  for (int i = 0; i < kDecoding; ++i) {
    Request r;
    const auto from = text.begin() + 40 * i;
    r.prompt.assign(from, from + 12 + 4 * i);
    r.limit = 100000;  // past the context: a request ends only when cancelled
    r.sampling = s;
    decoding.push_back(engine.add(r));
  }
  Request longOne;
  while (longOne.prompt.size() < kLongPrompt) longOne.prompt.insert(longOne.prompt.end(), text.begin(), text.end());
  longOne.prompt.resize(kLongPrompt);
  longOne.limit = 1;
  longOne.sampling = s;

  Run out;
  std::map<int, Clock::time_point> last;  // each decoding request's last token
  std::string phase = "warm";
  int longId = -1;
  Clock::time_point added;
  for (int step = 0;; ++step) {
    if (step == kWarmSteps) phase = "before";
    if (!withPrompt && step == kWarmSteps + control) break;
    if (withPrompt && step == kWarmSteps + kBeforeSteps) {
      phase = "during";
      added = Clock::now();
      longId = engine.add(longOne);
    }
    const Clock::time_point begin = Clock::now();
    const std::vector<Progress> steps = engine.advance();
    const Clock::time_point now = Clock::now();
    if (phase != "warm") out.steps.push_back(std::chrono::duration<double>(now - begin).count());
    if (phase == "during") ++out.promptSteps;
    bool first = false;
    for (const Progress& p : steps) {
      if (p.request == longId && !p.tokens.empty()) first = true;
      if (p.request == longId || p.tokens.empty()) continue;
      if (const auto it = last.find(p.request); it != last.end() && phase != "warm")
        out.gaps[phase].push_back(std::chrono::duration<double>(now - it->second).count());
      last[p.request] = now;
    }
    if (first) {
      out.timeToFirst = std::chrono::duration<double>(now - added).count();
      phase = "after";
    }
    if (phase == "after" && out.gaps["after"].size() >= static_cast<size_t>(kDecoding * kAfterSteps)) break;
  }
  for (int id : decoding) engine.cancel(id);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: bench_prefill_budget MODEL_FOLDER [THREADS]\n");
    return 2;
  }
  if (argc == 3) setenv("GIZML_THREADS", argv[2], 1);
  try {
    const Model model = load(argv[1]);
    const std::vector<TokenId> text = textTokens(model);
    std::printf("%s, %d threads: %d decoding requests, a %zu-token prompt joins them\n", argv[1],
                gizml::core::threadCount(), kDecoding, kLongPrompt);
    run(model, false, text);  // warms the weights' pages and the buffers; not counted
    std::map<bool, Run> runs;
    for (bool budget : {true, false}) runs[budget] = run(model, budget, text);
    const int longest = static_cast<int>(std::max(runs[true].steps.size(), runs[false].steps.size()));
    const Run alone = run(model, true, text, false, longest);
    std::printf("%-7s %-7s %10s %10s %8s\n", "budget", "phase", "p50 ms", "p99 ms", "tokens");
    for (bool budget : {true, false})
      for (const char* phase : {"before", "during", "after"}) {
        const std::vector<double>& g = runs[budget].gaps[phase];
        std::printf("%-7s %-7s %10.2f %10.2f %8zu\n", budget ? "on" : "off", phase, 1e3 * percentile(g, 50),
                    1e3 * percentile(g, 99), g.size());
      }
    for (bool budget : {true, false})
      std::printf("budget %-3s: time to first token %.0f ms (prompt read in %d steps), during/before p50 %.2f\n",
                  budget ? "on" : "off", 1e3 * runs[budget].timeToFirst, runs[budget].promptSteps,
                  percentile(runs[budget].gaps["during"], 50) / percentile(runs[budget].gaps["before"], 50));
    // Pace: the steps while the prompt is read against the same steps of the control.
    for (bool budget : {true, false}) {
      const Run& r = runs[budget];
      const auto from = static_cast<std::ptrdiff_t>(kBeforeSteps), to = from + r.promptSteps;
      const std::vector<double> with(r.steps.begin() + from, r.steps.begin() + to);
      const std::vector<double> without(alone.steps.begin() + from, alone.steps.begin() + to);
      std::printf("budget %-3s: while the prompt is read, a step of the 4 takes p50 %.2f ms (alone %.2f ms): pace %.2f "
                  "of their own\n",
                  budget ? "on" : "off", 1e3 * percentile(with, 50), 1e3 * percentile(without, 50),
                  percentile(without, 50) / percentile(with, 50));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_prefill_budget: %s\n", e.what());
    return 1;
  }
  return 0;
}
