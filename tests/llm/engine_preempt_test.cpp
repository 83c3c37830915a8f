// A step that needs more KV pages than the pool has, once idle slots gave theirs: the requests
// admitted last give their pages back and wait (preempted), start again when the pool has room,
// and give the tokens each gives alone.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <map>

#include "llm/llm_test_util.h"
#include "llm/pool_fixture.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

constexpr int64_t kPage = 256;

// Runs the requests in `engine` to their ends, all added at once, checking every step that the
// pool's pages in use stay within it and that no request gives tokens after its end.
std::vector<std::vector<TokenId>> runTogether(Engine& engine, const std::vector<Request>& requests) {
  std::map<int, size_t> index;
  for (size_t i = 0; i < requests.size(); ++i) index[engine.add(requests[i])] = i;
  std::vector<std::vector<TokenId>> out(requests.size());
  std::vector<bool> ended(requests.size(), false);
  while (engine.running() > 0) {
    for (const Progress& p : engine.advance()) {
      const size_t i = index.at(p.request);
      EXPECT_FALSE(ended[i]) << "request " << i;
      out[i].insert(out[i].end(), p.tokens.begin(), p.tokens.end());
      ended[i] = p.finish != Finish::Running;
    }
    EXPECT_LE(engine.poolPagesUsed() * kPage, engine.poolTokens());
  }
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_TRUE(ended[i]) << "request " << i;
  return out;
}

std::vector<TokenId> alone(const Request& r) {
  Engine engine(llama(), nullptr, {}, 1, 1024);
  return engine.generate({r})[0].tokens;
}

// Three prompts of 160 tokens (read in one step: 480 rows, within kPromptRowsPerStep) in a pool
// of 5 pages: read, they hold a page each; at position 256 each needs a second, so the last
// admitted (C, sampled) gives its page back. When B ends, C starts again beside A: from its state
// in host memory, or reading its prompt and the tokens it drew again (in parts beside A's
// decoding). Each gives what it gives alone.
TEST(EnginePreempt, RequestsPreemptedWhenThePoolRunsShortGiveTheirTokensAlone) {
  static_assert(3 * 160 <= kPromptRowsPerStep);
  const std::vector<Request> requests = {request(tokens(160, 1), 130), request(tokens(160, 2), 100),
                                         request(tokens(160, 3), 120, sample(0.9, 0, 1.0, 7))};
  for (const bool keep : {true, false}) {
    Engine engine(llama(), nullptr, {}, 3, 1024, 5 * kPage);
    if (!keep) engine.setHostCache(0);
    const std::vector<std::vector<TokenId>> got = runTogether(engine, requests);
    EXPECT_GE(engine.preemptions(), 1) << "keep " << keep;
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(got[i].size(), static_cast<size_t>(requests[i].limit));
      EXPECT_EQ(got[i], alone(requests[i])) << "request " << i << ", keep " << keep;
    }
  }
}

// Three prompts of 300 tokens (two pages each) in a pool of 4 pages, one slot's context: the
// third waits before it read anything, then reads its prompt once the first two end.
TEST(EnginePreempt, APromptThatDoesNotFitWaitsForTheOthers) {
  const std::vector<Request> requests = {request(tokens(300, 4), 20), request(tokens(300, 5), 20),
                                         request(tokens(300, 6), 20)};
  Engine engine(llama(), nullptr, {}, 3, 1024, 4 * kPage);
  const std::vector<std::vector<TokenId>> got = runTogether(engine, requests);
  EXPECT_GE(engine.preemptions(), 1);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i], alone(requests[i])) << "request " << i;
}

// A request added while an older one waits for pages does not start before it: in a pool of 3
// pages, B gives its page to A at position 256; C, added then, waits too (it would not have
// started before B), and B draws its next token no later than C its first.
TEST(EnginePreempt, ARequestAddedLaterWaitsBehindAPreemptedOne) {
  const Request a = request(tokens(250, 10), 30), b = request(tokens(250, 11), 30), c = request(tokens(100, 12), 5);
  Engine engine(llama(), nullptr, {}, 3, 768, 3 * kPage);
  std::map<int, std::vector<TokenId>> out;
  std::map<int, std::vector<int>> stepsOf;  // per request, the step of each of its tokens
  int step = 0;
  const auto advance = [&] {
    for (const Progress& p : engine.advance()) {
      out[p.request].insert(out[p.request].end(), p.tokens.begin(), p.tokens.end());
      stepsOf[p.request].insert(stepsOf[p.request].end(), p.tokens.size(), step);
    }
    ++step;
  };
  const int aId = engine.add(a), bId = engine.add(b);
  while (engine.preemptions() == 0) advance();
  const size_t bDrawn = stepsOf[bId].size();
  const int cId = engine.add(c);
  while (engine.running() > 0) advance();
  ASSERT_LT(bDrawn, stepsOf[bId].size());
  EXPECT_LE(stepsOf[bId][bDrawn], stepsOf[cId].at(0));
  EXPECT_EQ(out[aId], alone(a));
  EXPECT_EQ(out[bId], alone(b));
  EXPECT_EQ(out[cId], alone(c));
}

// A request longer than a slot's context (which the pool holds at least) is an Error naming both
// sizes; the engine goes on with the others.
TEST(EnginePreempt, ARequestLargerThanThePoolIsAnErrorAndTheOthersGoOn) {
  Engine engine(llama(), nullptr, {}, 2, 1024, 4 * kPage);
  const Request r = request(tokens(200, 8), 8);
  const int id = engine.add(r);
  std::vector<TokenId> out;
  const auto collect = [&] {
    for (const Progress& p : engine.advance())
      if (p.request == id) out.insert(out.end(), p.tokens.begin(), p.tokens.end());
  };
  collect();
  expectError([&] { engine.add(request(tokens(1025, 9), 4)); },
              {"request: the prompt's 1025 tokens exceed the engine's 1024-token context"});
  while (engine.running() > 0) collect();
  EXPECT_EQ(out, alone(r));
  EXPECT_EQ(engine.preemptions(), 0);
}

}  // namespace
