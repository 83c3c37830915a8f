#pragma once
// The threads gizml's CPU work is split over (one persistent pool).
namespace gizml::core {

/// Threads the library's parallel loops use: the cores, or GIZML_THREADS when set.
int threadCount();

}  // namespace gizml::core
