// The prefill budget's estimates (llm/engine/prefill_budget.h) on times given, not measured: the
// rows a step may add are a decode step's time over a prompt row's, both running estimates.
// The times are powers of two, so the quotients are exact.
#include "llm/engine/prefill_budget.h"

#include <gtest/gtest.h>

using gizml::llm::PrefillBudget;

namespace {

constexpr double kDecode = 1.0 / 64;  // seconds of a step of the decoding requests alone
constexpr double kRow = 1.0 / 4096;   // and of a prompt row beside them: 64 rows

}  // namespace

TEST(PrefillBudget, ADecodeStepsTimeOverAPromptRows) {
  PrefillBudget b;
  EXPECT_EQ(b.rows(4), PrefillBudget::kFirstChunk);  // nothing timed
  b.measured(4, 0, kDecode);                         // 4 decode rows alone
  EXPECT_EQ(b.rows(4), PrefillBudget::kFirstChunk);  // no prompt row timed beside them
  b.measured(4, 32, kDecode + 32 * kRow);
  EXPECT_EQ(b.rows(4), 64);
  b.measured(0, 512, 1.0);  // prompts alone: their step's fixed costs are no row's, not counted
  EXPECT_EQ(b.rows(4), 64);
  b.measured(4, 40, kDecode / 2);  // faster than the 4 alone: noise, which says nothing of a row
  EXPECT_EQ(b.rows(4), 64);
}

TEST(PrefillBudget, TheDecodeStepOfTheNearestRowsTimed) {
  PrefillBudget b;
  b.measured(4, 0, kDecode);
  b.measured(8, 0, 2 * kDecode);
  b.measured(4, 16, kDecode + 16 * kRow);
  EXPECT_EQ(b.rows(4), 64);
  EXPECT_EQ(b.rows(1), 64);
  EXPECT_EQ(b.rows(5), 64);
  EXPECT_EQ(b.rows(6), 64);  // as near to both: the fewer rows
  EXPECT_EQ(b.rows(7), 128);
  EXPECT_EQ(b.rows(12), 128);
}

TEST(PrefillBudget, EstimatesFollowTheSteps) {
  PrefillBudget b;
  b.measured(2, 0, kDecode);
  b.measured(2, 16, kDecode + 16 * kRow);
  EXPECT_EQ(b.rows(2), 64);
  // A slower decode step moves the estimate part of the way.
  b.measured(2, 0, 2 * kDecode);
  EXPECT_GT(b.rows(2), 64);
  EXPECT_LT(b.rows(2), 128);
  // Rows grow dearer as a prompt's context grows (twice as dear here): the estimate follows, the
  // older rows weighing less with every step.
  PrefillBudget c;
  c.measured(2, 0, kDecode);
  c.measured(2, 16, kDecode + 16 * kRow);
  c.measured(2, 16, kDecode + 16 * 2 * kRow);
  EXPECT_LT(c.rows(2), 64);
  EXPECT_GT(c.rows(2), 32);
  for (int i = 0; i < 30; ++i) {
    c.measured(2, 16, kDecode + 16 * 2 * kRow);
    c.measured(2, 0, kDecode);  // (a step of theirs alone, as the engine runs every few)
  }
  EXPECT_EQ(c.rows(2), 32);
}

// Beside a prompt, every kAloneEvery-th step is the decoding requests' alone: their own steps
// grow slower with their contexts, and only such a step tells that apart from the rows' cost.
TEST(PrefillBudget, EveryFewStepsTheDecodingRequestsAreTimedAlone) {
  PrefillBudget b;
  b.measured(2, 0, kDecode);
  for (int64_t i = 1; i < PrefillBudget::kAloneEvery; ++i) {
    EXPECT_GT(b.rows(2), 0) << i;
    b.measured(2, 16, kDecode + 16 * kRow);
  }
  EXPECT_EQ(b.rows(2), 0);
  // Alone they take twice as long now: a row may add as much again.
  b.measured(2, 0, 3 * kDecode);
  EXPECT_EQ(b.rows(2), 128);
}

// Prompt rows that cost less than the noise leave no estimate of a row; the decoding requests
// are still timed alone every few steps (the engine test saw a fast machine go 86 steps without).
TEST(PrefillBudget, WithoutAnEstimateOfARowTheDecodingRequestsAreStillTimedAlone) {
  PrefillBudget b;
  b.measured(2, 0, kDecode);
  for (int64_t i = 1; i < PrefillBudget::kAloneEvery; ++i) {
    EXPECT_EQ(b.rows(2), PrefillBudget::kFirstChunk) << i;
    b.measured(2, PrefillBudget::kFirstChunk, kDecode / 2);  // faster than the decode step alone
  }
  EXPECT_EQ(b.rows(2), 0);
  b.measured(2, 0, kDecode);
  EXPECT_EQ(b.rows(2), PrefillBudget::kFirstChunk);
}

TEST(PrefillBudget, AtLeastTheFloorAndAtMostTheCeiling) {
  PrefillBudget slow, fast;
  slow.measured(1, 0, kDecode);
  slow.measured(1, 16, kDecode + 16 * kDecode);  // a row costs a whole decode step
  EXPECT_EQ(slow.rows(1), PrefillBudget::kFloor);
  fast.measured(1, 0, kDecode);
  fast.measured(1, 16, kDecode + 16 * kRow / 1024);
  EXPECT_EQ(fast.rows(1), PrefillBudget::kCeiling);
}
