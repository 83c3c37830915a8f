#pragma once
// A persistent pool of worker threads, one per core, that splits index ranges among them. Tasks
// go to whichever thread takes them first (the caller works too, and waits only for workers that
// joined); an idle thread spins briefly (GIZML_POOL_SPIN_US, default 100, yielding meanwhile)
// while the machine has no other runnable work, then sleeps on a condition variable.
// threadCount(), parallelFor and parallelTasks are public (gizml/threads.h); threadCount() is 1
// inside a SingleThreadScope.
#include <gizml/threads.h>

namespace gizml::core {

/// body(task) for every task in [0, tasks), as parallelTasks, but each thread first works
/// through a contiguous span of them (tasks 0 .. tasks / threads - 1 for the first, and so on),
/// then takes the last tasks of the spans still open: neighbouring tasks that read neighbouring
/// memory stay on one thread, and one slowed or woken late still leaves its work to the others.
void parallelSpans(int64_t tasks, FunctionRef<void(int64_t)> body);

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

}  // namespace gizml::core
