// Engine::warm runs each kind of step once on states of its own: the engine's slots, pool and
// tokens are as they were without it.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include "llm/llm_test_util.h"
#include "llm/pool_fixture.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

TEST(EngineWarm, LeavesSlotsPoolAndTokensAsTheyWere) {
  const Request greedy = request(tokens(40, 1), 12);
  Engine cold(llama(), nullptr, {}, 3, 512, 3 * 256);
  const std::vector<TokenId> want = cold.generate({greedy})[0].tokens;
  Engine warmed(llama(), nullptr, {}, 3, 512, 3 * 256);
  EXPECT_GE(warmed.warm(), 0.0);
  EXPECT_EQ(warmed.freeSlots(), 3);
  EXPECT_EQ(warmed.poolPagesUsed(), 0);
  EXPECT_EQ(warmed.generate({greedy})[0].tokens, want);
}

}  // namespace
