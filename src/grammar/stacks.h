#pragma once
// One byte's step of a set of parse stacks (matcher.cpp), shared with the token masks.
#include <gizml/grammar.h>

namespace gizml::grammar {

/// The stacks after byte b (sorted, without repeats; empty: b is not allowed).
std::vector<Matcher::Stack> advanceStacks(const Rules& rules, const std::vector<Matcher::Stack>& stacks, unsigned char b);

}  // namespace gizml::grammar
