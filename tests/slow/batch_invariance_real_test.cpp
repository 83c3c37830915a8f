// Batch invariance on a real model (docs/architecture.md): SmolLM2-135M-Instruct converted at our
// default 4 bits (its layers through the int8 kernels), 8 chat requests at once through one
// engine whose slots held other requests before (4 the same, 4 different; greedy and seeded),
// each against itself alone in a fresh engine: the same tokens and the same bits of every log
// probability (the chosen token's and the top 5). Issue 17 found the third token's log
// probability -1.579 alone and -1.324 beside three copies. Skipped when the model is not installed.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <cstring>

#include "real_models.h"

namespace {

const Case kSmolLM2At4Bits = {"smollm2", Bits{}};

nlohmann::ordered_json question(const std::string& text) { return {{{"role", "user"}, {"content", text}}}; }

void expectSameLogprobs(const std::vector<TokenLogprob>& got, const std::vector<TokenLogprob>& want, size_t request) {
  ASSERT_EQ(got.size(), want.size()) << "request " << request;
  for (size_t t = 0; t < want.size(); ++t) {
    EXPECT_EQ(std::memcmp(&got[t].logprob, &want[t].logprob, sizeof(float)), 0)
        << "request " << request << ", token " << t << ": " << got[t].logprob << " together, " << want[t].logprob
        << " alone";
    ASSERT_EQ(got[t].top.size(), want[t].top.size());
    for (size_t k = 0; k < want[t].top.size(); ++k) {
      EXPECT_EQ(got[t].top[k].first, want[t].top[k].first) << "request " << request << ", token " << t;
      EXPECT_EQ(std::memcmp(&got[t].top[k].second, &want[t].top[k].second, sizeof(float)), 0)
          << "request " << request << ", token " << t << ", top " << k;
    }
  }
}

TEST(RealModelBatchInvariance, SmolLM2At4BitsGivesEachRequestItsTokensAlone) {
  const std::string folder = convertedFolder(kSmolLM2At4Bits);
  if (folder.empty()) GTEST_SKIP() << notInstalled(kSmolLM2At4Bits);
  const Model model = load(folder);
  const auto ask = [&](const std::string& text, Sampling s) {
    s.logprobs = 5;
    Request r;
    r.prompt = model.chatTokens(question(text)).ids;
    r.limit = 24;
    r.sampling = s;
    return r;
  };
  std::vector<Request> requests(4, ask("Name three rivers.", greedy()));
  requests.push_back(ask("Name three rivers and their countries.", greedy()));  // shares the start
  requests.push_back(ask("What is the capital of France?", sample(0.8, 40, 0.95, 11)));
  requests.push_back(ask("Write a haiku about the sea.", sample(1.0, 0, 1.0, 12)));
  requests.push_back(ask("Name three rivers.", sample(0.7, 0, 0.9, 13)));
  const int64_t context = 256;

  std::vector<Result> alone;
  for (const Request& r : requests) alone.push_back(model.engine(1, context).generate({r})[0]);

  Engine engine = model.engine(8, context);
  engine.generate({ask("Name three mountains.", greedy()), ask("Say hello.", sample(1.0, 0, 1.0, 5)),
                   ask("Name three rivers in Asia, please.", greedy())});
  const std::vector<Result> together = engine.generate(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens)
        << "request " << i << ": together \"" << model.tokenizer().decode(together[i].tokens, true) << "\", alone \""
        << model.tokenizer().decode(alone[i].tokens, true) << "\"";
    expectSameLogprobs(together[i].logprobs, alone[i].logprobs, i);
  }
  std::printf("8 requests at once, each as alone: \"%s\"\n", model.tokenizer().decode(together[0].tokens, true).c_str());
}

}  // namespace
