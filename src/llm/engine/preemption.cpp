// When the KV pool runs short for a step (Engine::Impl, engine_impl.h): the requests admitted
// last give their pages back and wait, and start again once the pool has room (vLLM's
// preemption by recompute, with the state moved to host memory where the engine keeps chats).
#include "llm/engine/engine_impl.h"

namespace gizml::llm {

std::map<int, Engine::Impl::Running>::reverse_iterator Engine::Impl::newestStepping() {
  return std::find_if(running.rbegin(), running.rend(), [](const auto& entry) { return entry.second.steps(); });
}

void Engine::Impl::roomFor(Plan& plan) {
  while (!makeRoom(pagesFor(plan.feeds))) {
    const auto newest = newestStepping();
    if (newest == running.rend() || (plan.ids.size() == 1 && plan.ids[0] == newest->first)) return;
    const int id = newest->first;
    Running& r = newest->second;
    const auto fed = std::find(plan.ids.begin(), plan.ids.end(), id);
    if (fed != plan.ids.end()) {
      const auto at = fed - plan.ids.begin();
      const auto rows = static_cast<int64_t>(plan.feeds[static_cast<size_t>(at)].tokens.size());
      (r.decodes() ? plan.decodeRows : plan.promptRows) -= rows;
      plan.ids.erase(fed);
      plan.feeds.erase(plan.feeds.begin() + at);
    }
    preempt(id, r);
  }
}

void Engine::Impl::preempt(int id, Running& r) {
  handOnHead(id);  // the requests waiting for the head it reads read it themselves
  Slot& slot = slots[r.slot];
  park(slot, false);  // to host memory: its pages must go back
  slot.state->truncate(0);
  slot.held.clear();
  r.toFeed.clear();
  r.drafts.clear();
  r.marks.clear();
  r.preempted = true;
  ++preemptions;
}

bool Engine::Impl::roomToResume(int id, const Running& r) {
  const int64_t page = pool->pageTokens();
  const int64_t pages = (static_cast<int64_t>(r.sequence().size()) + page - 1) / page;
  for (;;) {
    const auto stepping = std::count_if(running.begin(), running.end(), [](const auto& e) { return e.second.steps(); });
    if (makeRoom(pages + stepping) || stepping == 0) return true;  // with none stepping: alone it fits
    const auto newest = newestStepping();
    if (newest->first < id) return false;
    preempt(newest->first, newest->second);
  }
}

void Engine::Impl::resumeWaiting() {
  for (auto& [id, r] : running) {
    if (!r.preempted) continue;
    if (!roomToResume(id, r)) return;  // a later one never starts before it
    slots[r.slot].busy = false;  // its own slot is one that seat may take again
    r.slot = seat(r.sequence());
    r.preempted = false;
    r.resumed = true;
    takeHead(r, id);
    readRest(r);
  }
}

}  // namespace gizml::llm
