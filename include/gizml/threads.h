#pragma once
// The threads gizml's CPU work is split over (one persistent pool), and the pool's two loops, for
// work of a program's own beside the library's on the same threads.
#include <gizml/function_ref.h>

#include <cstdint>

namespace gizml::core {

/// Threads the library's parallel loops use: the cores, or GIZML_THREADS when set.
int threadCount();

/// Calls body(begin, end) on disjoint ranges covering [0, n), each at least `grain` long (but
/// the last), in parallel on the pool. Runs inline when n is small or when called from a worker.
void parallelFor(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> body);

/// Calls body(task) for task in [0, tasks): one task per call, distributed across the pool.
void parallelTasks(int64_t tasks, FunctionRef<void(int64_t)> body);

}  // namespace gizml::core
