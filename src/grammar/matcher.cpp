// Matcher: the set of parse stacks of a text so far, advanced a byte at a time.
#include <gizml/error.h>

#include <algorithm>

#include "grammar/rules.h"
#include "grammar/stacks.h"

namespace gizml::grammar {

namespace {

// Moves the stack on to its next byte sets: entering rules (each alternative a stack of its own)
// and leaving finished ones. A worklist, not recursion, so that no grammar deepens the C++ stack;
// it ends because grammars have no left recursion (Builder::finish refuses it).
void settle(const Rules& r, Matcher::Stack start, std::vector<Matcher::Stack>& out) {
  std::vector<Matcher::Stack> work = {std::move(start)};  // stacks still to settle
  while (!work.empty()) {
    Matcher::Stack stack = std::move(work.back());
    work.pop_back();
    bool entered = false;
    while (!stack.empty() && !entered) {
      const int32_t at = stack.back();
      const Element& e = r.elements[static_cast<size_t>(at)];
      if (e.rule == Element::kEnd) {  // an alternative done: go on after its reference
        stack.pop_back();
        continue;
      }
      if (e.rule == Element::kBytes) break;
      // Enter the rule; its continuation stays below unless the reference ended its alternative
      // (so right recursion does not deepen the stack).
      stack.pop_back();
      if (r.elements[static_cast<size_t>(at) + 1].rule != Element::kEnd) stack.push_back(at + 1);
      for (int32_t alternative : r.alternatives[static_cast<size_t>(e.rule)]) {
        Matcher::Stack s = stack;
        s.push_back(alternative);
        work.push_back(std::move(s));
      }
      entered = true;
    }
    if (!entered) out.push_back(std::move(stack));
  }
}

void normalize(std::vector<Matcher::Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

}  // namespace

std::vector<Matcher::Stack> advanceStacks(const Rules& r, const std::vector<Matcher::Stack>& stacks, unsigned char b) {
  std::vector<Matcher::Stack> next;
  for (const Matcher::Stack& s : stacks) {
    if (s.empty()) continue;
    const Element& e = r.elements[static_cast<size_t>(s.back())];
    if (!r.byteSets[static_cast<size_t>(e.bytes)].test(b)) continue;
    Matcher::Stack t = s;
    ++t.back();
    settle(r, std::move(t), next);
  }
  normalize(next);
  return next;
}

Matcher::Matcher(const Grammar& grammar) : rules_(grammar.rules_) {
  for (int32_t start : rules_->alternatives[static_cast<size_t>(rules_->root)]) settle(*rules_, {start}, stacks_);
  normalize(stacks_);
}

bool Matcher::accepts(std::string_view bytes) const {
  std::vector<Stack> s = stacks_;
  for (char c : bytes) {
    s = advanceStacks(*rules_, s, static_cast<unsigned char>(c));
    if (s.empty()) return false;
  }
  return true;
}

bool Matcher::advance(std::string_view bytes) {
  std::vector<Stack> s = stacks_;
  for (char c : bytes) {
    s = advanceStacks(*rules_, s, static_cast<unsigned char>(c));
    if (s.empty()) return false;
  }
  stacks_ = std::move(s);
  return true;
}

bool Matcher::complete() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool Matcher::canContinue() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return !s.empty(); });
}

}  // namespace gizml::grammar
