// core/thread_pool.h: every task runs exactly once (parallelTasks and parallelSpans), on whichever thread takes it, through many
// jobs in a row (workers then spinning), after pauses long enough for them to sleep, from two
// calling threads at once, with errors rethrown to the caller and nested calls run inline.
#include "core/thread_pool.h"

#include <gizml/error.h>
#include <gizml/function_ref.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/expect_error.h"

using namespace gizml;

namespace {

// Runs `tasks` tasks and checks that each ran once.
void expectEachTaskOnce(int64_t tasks) {
  std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
  core::parallelTasks(tasks, [&](int64_t t) { runs[static_cast<size_t>(t)].fetch_add(1); });
  for (int64_t t = 0; t < tasks; ++t) ASSERT_EQ(runs[static_cast<size_t>(t)].load(), 1) << "task " << t << " of " << tasks;
}

}  // namespace

TEST(ThreadPool, EveryTaskRunsOnce) {
  for (int64_t tasks : {0, 1, 2, 3, 7, 64, 1000}) expectEachTaskOnce(tasks);
}

TEST(ThreadPool, ParallelSpansRunsEveryTaskOnce) {
  for (int64_t tasks : {0, 1, 2, 3, 7, 64, 1000}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
    core::parallelSpans(tasks, [&](int64_t t) { runs[static_cast<size_t>(t)].fetch_add(1); });
    for (int64_t t = 0; t < tasks; ++t) ASSERT_EQ(runs[static_cast<size_t>(t)].load(), 1) << "task " << t << " of " << tasks;
  }
}

TEST(ThreadPool, ParallelSpansLeaveASlowThreadsLastTasksToTheOthers) {
  if (core::threadCount() < 2) GTEST_SKIP() << "one thread";
  // Task 0 (the first of the first span) waits until another thread has run that span's last
  // task, which only a thread taking the others' tasks from the back can do.
  const int64_t tasks = 64, lastOfFirst = tasks / core::threadCount() - 1;
  std::atomic<bool> stolen{false};
  std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
  core::parallelSpans(tasks, [&](int64_t t) {
    if (t == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!stolen.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (t == lastOfFirst && t != 0) stolen.store(true);
    runs[static_cast<size_t>(t)].fetch_add(1);
  });
  EXPECT_TRUE(stolen.load()) << "no thread took task " << lastOfFirst << " while task 0 waited";
  for (int64_t t = 0; t < tasks; ++t) ASSERT_EQ(runs[static_cast<size_t>(t)].load(), 1) << "task " << t;
}

TEST(ThreadPool, ParallelForCoversTheRangeInPiecesOfAtLeastTheGrain) {
  for (int64_t n : {1, 5, 64, 1001})
    for (int64_t grain : {1, 3, 100}) {
      std::mutex m;
      std::set<std::pair<int64_t, int64_t>> ranges;
      core::parallelFor(n, grain, [&](int64_t b, int64_t e) {
        std::lock_guard lock(m);
        ranges.insert({b, e});
      });
      int64_t next = 0;
      for (auto [b, e] : ranges) {
        EXPECT_EQ(b, next) << n << " by " << grain;
        EXPECT_TRUE(e - b >= grain || e == n) << n << " by " << grain << ": [" << b << ", " << e << ")";
        next = e;
      }
      EXPECT_EQ(next, n);
    }
}

TEST(ThreadPool, ManyJobsInARowAndAfterPausesLongEnoughToSleep) {
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 20000; ++job) {
    // Every 2000th job after a pause past the spin (workers asleep on the condition variable).
    if (job % 2000 == 1999) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    core::parallelTasks(3, [&](int64_t t) { sum.fetch_add(t + 1); });
  }
  EXPECT_EQ(sum.load(), 20000 * 6);
}

TEST(ThreadPool, WorkersWriteResultsTheCallerReads) {
  // Plain (non-atomic) writes by whichever thread, read after the call returns.
  std::vector<int64_t> out(4096);
  for (int round = 0; round < 200; ++round) {
    core::parallelFor(static_cast<int64_t>(out.size()), 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = i * round;
    });
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<int64_t>(i) * round);
  }
}

TEST(ThreadPool, TwoCallingThreadsAtOnce) {
  std::atomic<int64_t> a{0}, b{0};
  const auto caller = [](std::atomic<int64_t>& sum) {
    for (int job = 0; job < 2000; ++job) core::parallelTasks(4, [&](int64_t t) { sum.fetch_add(t); });
  };
  std::thread other(caller, std::ref(b));
  caller(a);
  other.join();
  EXPECT_EQ(a.load(), 2000 * 6);
  EXPECT_EQ(b.load(), 2000 * 6);
}

TEST(ThreadPool, AnErrorInATaskReachesTheCallerAndThePoolGoesOn) {
  std::atomic<int> ran{0};
  expectError(
      [&] {
        core::parallelTasks(16, [&](int64_t t) {
          ran.fetch_add(1);
          check(t != 5, "task 5 fails");
        });
      },
      {"task 5 fails"});
  EXPECT_EQ(ran.load(), 16);  // the other tasks still ran
  expectEachTaskOnce(100);
}

TEST(ThreadPool, NestedCallsRunInline) {
  std::atomic<int64_t> sum{0};
  core::parallelTasks(8, [&](int64_t) {
    const auto self = std::this_thread::get_id();
    core::parallelFor(100, 1, [&](int64_t b, int64_t e) {
      EXPECT_EQ(std::this_thread::get_id(), self);
      EXPECT_EQ(b, 0);
      EXPECT_EQ(e, 100);
      sum.fetch_add(e - b);
    });
  });
  EXPECT_EQ(sum.load(), 800);
}

// gizml/function_ref.h, the bodies' type: it calls the very callable it was made from (a
// lambda's state changes are the caller's), passes arguments and results through, and takes
// std::function objects and const callables alike.

TEST(FunctionRef, CallsTheCallableItRefersTo) {
  int calls = 0;
  auto counter = [&calls, n = 0](int64_t add) mutable {
    n += static_cast<int>(add);
    ++calls;
    return n;
  };
  const FunctionRef<int(int64_t)> ref = counter;
  EXPECT_EQ(ref(3), 3);
  EXPECT_EQ(ref(4), 7);  // the same lambda object, not a copy
  EXPECT_EQ(counter(1), 8);
  EXPECT_EQ(calls, 3);

  const std::function<int(int)> held = [](int x) { return x + 1; };
  EXPECT_EQ(FunctionRef<int(int)>(held)(41), 42);
  const auto constant = [](const std::string& s) { return s.size(); };
  EXPECT_EQ(FunctionRef<size_t(const std::string&)>(constant)("four"), 4u);
}

TEST(FunctionRef, ALambdaCapturingManyNamesRunsOnThePool) {
  // Five captured references: more than std::function keeps without the heap.
  int64_t a = 1, b = 2, c = 3, d = 4, e = 5;
  std::vector<std::atomic<int64_t>> out(64);
  core::parallelFor(64, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) out[static_cast<size_t>(i)] = i * (a + b + c + d + e);
  });
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(out[static_cast<size_t>(i)].load(), i * 15);
}
