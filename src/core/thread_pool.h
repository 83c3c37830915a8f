#pragma once
// A persistent pool of worker threads, one per core, that splits index ranges among them. Tasks
// go to whichever thread takes them first (the caller works too, and waits only for workers that
// joined); an idle thread spins briefly (GIZML_POOL_SPIN_US, default 100, yielding meanwhile)
// while the machine has no other runnable work, then sleeps on a condition variable.
// threadCount() is public (gizml/threads.h): the threads parallelFor uses, 1 inside a
// SingleThreadScope.
#include <gizml/threads.h>

#include <cstdint>
#include <functional>

namespace gizml::core {

/// While one lives, this thread's parallelFor and parallelTasks run inline and threadCount() is 1:
/// the single-thread result inside a process whose pool has more threads (tests/ops compares every
/// backend against it).
class SingleThreadScope {
 public:
  SingleThreadScope();
  ~SingleThreadScope();
  SingleThreadScope(const SingleThreadScope&) = delete;
  SingleThreadScope& operator=(const SingleThreadScope&) = delete;

 private:
  bool outer_;
};

/// Calls body(begin, end) on disjoint ranges covering [0, n), each at least `grain` long (but
/// the last), in parallel on the pool. Runs inline when n is small or when called from a worker.
void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

/// Calls body(task) for task in [0, tasks): one task per call, distributed across the pool.
void parallelTasks(int64_t tasks, const std::function<void(int64_t)>& body);

}  // namespace gizml::core
