// Builder: grammars made in code (the JSON rules, schemas), laid out flat by finish().
#include <gizml/error.h>

#include "grammar/rules.h"

namespace gizml::grammar {

Builder::Symbol Builder::bytes(const std::bitset<256>& set) {
  for (size_t i = 0; i < rules_->byteSets.size(); ++i)
    if (rules_->byteSets[i] == set) return {Element::kBytes, static_cast<int32_t>(i)};
  rules_->byteSets.push_back(set);
  return {Element::kBytes, static_cast<int32_t>(rules_->byteSets.size() - 1)};
}

Builder::Symbol Builder::byte(unsigned char b) { return range(b, b); }

Builder::Symbol Builder::range(unsigned char from, unsigned char to) {
  std::bitset<256> set;
  for (unsigned b = from; b <= to; ++b) set.set(b);
  return bytes(set);
}

Builder::Symbol Builder::literal(std::string_view text) {
  Sequence s;
  for (char c : text) s.push_back(byte(static_cast<unsigned char>(c)));
  std::string name(1, '"');
  name.append(text).push_back('"');
  return rule(name, {s});
}

Builder::Symbol Builder::declare(const std::string& name) {
  check(pending_.size() < kMaxRules, "grammar: more than " + std::to_string(kMaxRules) + " rules (the schema is too large)");
  rules_->names.push_back(name);
  pending_.emplace_back();
  return {static_cast<int32_t>(pending_.size() - 1), -1};
}

void Builder::define(Symbol rule, const std::vector<Sequence>& alternatives) {
  check(rule.rule >= 0 && pending_[static_cast<size_t>(rule.rule)].empty(), "grammar: a rule is defined twice");
  check(!alternatives.empty(), "grammar: rule " + rules_->names[static_cast<size_t>(rule.rule)] + " has no alternative");
  pending_[static_cast<size_t>(rule.rule)] = alternatives;
}

Builder::Symbol Builder::rule(const std::string& name, const std::vector<Sequence>& alternatives) {
  const Symbol r = declare(name);
  define(r, alternatives);
  return r;
}

Builder::Symbol Builder::repeat(const std::string& name, Symbol s, int min, int max) {
  // Right recursion: the matcher drops a finished rule's end before going on, so a long run
  // does not deepen the stack.
  if (max < 0) {
    const Symbol star = declare(name + "*");
    define(star, {{}, {s, star}});
    Sequence head(static_cast<size_t>(min), s);
    head.push_back(star);
    return min == 0 ? star : rule(name, {head});
  }
  Symbol tail = rule(name + "{0}", {{}});
  for (int n = 1; n <= max - min; ++n) tail = rule(name + "{0," + std::to_string(n) + "}", {{}, {s, tail}});
  if (min == 0) return tail;
  Sequence head(static_cast<size_t>(min), s);
  head.push_back(tail);
  return rule(name, {head});
}

Grammar Builder::finish(Symbol root) {
  check(root.rule >= 0, "grammar: the root must be a rule");
  Rules& r = *rules_;
  r.alternatives.assign(pending_.size(), {});
  for (size_t i = 0; i < pending_.size(); ++i) {
    check(!pending_[i].empty(), "grammar: rule " + r.names[i] + " is declared but never defined");
    for (const Sequence& seq : pending_[i]) {
      r.alternatives[i].push_back(static_cast<int32_t>(r.elements.size()));
      for (const Symbol& s : seq) r.elements.push_back({s.rule, s.bytes});
      r.elements.push_back({Element::kEnd, -1});
    }
  }
  r.root = root.rule;
  pending_.clear();
  checkNoLeftRecursion(r);
  return Grammar(std::move(rules_));
}

}  // namespace gizml::grammar
