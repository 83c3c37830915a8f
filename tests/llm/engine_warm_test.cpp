// Engine::warm runs each kind of step once on states of its own: the engine's slots, pool and
// tokens are as they were without it; it saves the kernel tunings next to the kernel cache and
// the next engine's warm reads them, so nothing is measured again.
#include <gizhw/gpu.h>
#include <gizml/llm.h>
#include <gizml/tile.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "common/temporary.h"
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

TEST(EngineWarm, SavesTheTuningsAndTheNextEngineReadsThem) {
  namespace fs = std::filesystem;
  // A cache folder of this test's own (the kernel cache's parent, so the tunings' too).
  const fs::path cache = gizml::test::temporary("warm_tunings");
  const char* before = std::getenv("XDG_CACHE_HOME");
  const std::string saved = before ? before : "";
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  gizhw::gpu::clearTunings();
  // A tuning this process measured: the language models' steps tune no kernel of their own yet.
  const T::Tensor key = T::zeros({3, 5});
  const std::vector<Tile::Config> configs = {{{"v", 1}}, {{"v", 2}}};
  int runs = 0;
  const auto runWith = [&](const Tile::Config&) {
    ++runs;
    return std::vector<T::Tensor>{T::zeros({1})};
  };
  Tile::tune("warm_test", configs, {key}, runWith);
  const Tile::Config kept = *Tile::tuned("warm_test", {key});

  Engine first(llama(), nullptr, {}, 2, 256, 2 * 256);
  first.warm();
  EXPECT_EQ(gizhw::gpu::tuningsDirectory(), (cache / "gizml" / "tunings").string());
  EXPECT_TRUE(fs::exists(cache / "gizml" / "tunings" / "tunings.txt"));

  gizhw::gpu::clearTunings();  // as a new process would start
  const uint64_t measured = gizhw::gpu::tuningsMeasured();
  Engine second(llama(), nullptr, {}, 2, 256, 2 * 256);
  second.warm();
  ASSERT_TRUE(Tile::tuned("warm_test", {key}));
  EXPECT_EQ(*Tile::tuned("warm_test", {key}), kept);
  runs = 0;
  Tile::tune("warm_test", configs, {key}, runWith);
  EXPECT_EQ(runs, 1);  // the kept configuration run once, nothing timed
  EXPECT_EQ(gizhw::gpu::tuningsMeasured(), measured);

  gizhw::gpu::clearTunings();
  if (before) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else ::unsetenv("XDG_CACHE_HOME");
  fs::remove_all(cache);
}

}  // namespace
