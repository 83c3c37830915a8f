// Refusing left recursion when a grammar is built: a rule that can reach itself before reading a
// byte would send the matcher round forever ($defs that refer to each other first). Without it
// the finished grammar is one that every Matcher follows to its end, whatever text comes.
#include <gizml/error.h>

#include "grammar/rules.h"

namespace gizml::grammar {

void checkNoLeftRecursion(const Rules& r) {
  const size_t rules = r.alternatives.size();
  // Rules that can match no bytes, found as Horn clauses are: an alternative is empty once each
  // of its references is (one of bytes never is), each alternative counting what it still waits for.
  std::vector<char> nullable(rules, 0);
  std::vector<std::vector<size_t>> waiting(rules);  // rule -> the alternatives that refer to it
  std::vector<size_t> pending, owner;               // by alternative: references not yet empty; its rule
  std::vector<size_t> ready;
  for (size_t rule = 0; rule < rules; ++rule) {
    for (int32_t start : r.alternatives[rule]) {
      const size_t id = pending.size();
      size_t count = 0;
      bool bytes = false;
      for (size_t at = static_cast<size_t>(start); r.elements[at].rule != Element::kEnd; ++at) {
        if (r.elements[at].rule == Element::kBytes) bytes = true;
        else waiting[static_cast<size_t>(r.elements[at].rule)].push_back(id), ++count;
      }
      pending.push_back(bytes ? SIZE_MAX : count);
      owner.push_back(rule);
      if (count == 0 && !bytes && !nullable[rule]) nullable[rule] = 1, ready.push_back(rule);
    }
  }
  while (!ready.empty()) {
    const size_t rule = ready.back();
    ready.pop_back();
    for (size_t id : waiting[rule]) {
      if (pending[id] == SIZE_MAX || --pending[id] != 0 || nullable[owner[id]]) continue;
      nullable[owner[id]] = 1;
      ready.push_back(owner[id]);
    }
  }
  // The rules each one may enter before a byte: its alternatives' references up to the first
  // byte set or rule that cannot be empty. A cycle among them is left recursion (depth-first
  // search on an explicit stack: colours 0 unseen, 1 on the path, 2 done).
  std::vector<std::vector<size_t>> first(rules);
  for (size_t rule = 0; rule < rules; ++rule)
    for (int32_t start : r.alternatives[rule])
      for (size_t at = static_cast<size_t>(start); r.elements[at].rule >= 0; ++at) {
        first[rule].push_back(static_cast<size_t>(r.elements[at].rule));
        if (!nullable[static_cast<size_t>(r.elements[at].rule)]) break;
      }
  std::vector<char> colour(rules, 0);
  std::vector<std::pair<size_t, size_t>> path;  // rule, next edge
  for (size_t root = 0; root < rules; ++root) {
    if (colour[root]) continue;
    colour[root] = 1;
    path.push_back({root, 0});
    while (!path.empty()) {
      auto& [rule, edge] = path.back();
      if (edge == first[rule].size()) {
        colour[rule] = 2;
        path.pop_back();
        continue;
      }
      const size_t next = first[rule][edge++];
      check(colour[next] != 1, "grammar: rule " + r.names[next] + " reaches itself without reading a byte (left recursion)");
      if (colour[next] == 0) {
        colour[next] = 1;
        path.push_back({next, 0});
      }
    }
  }
}

}  // namespace gizml::grammar
