// When the KV pool runs short for a step (Engine::Impl, engine_impl.h): the requests admitted
// last give their pages back and wait, and start again once the pool has room (vLLM's
// preemption by recompute, with the state moved to host memory where the engine keeps chats).
#include "llm/engine/engine_impl.h"

namespace gizml::llm {

void Engine::Impl::roomFor(Plan& plan) {
  while (!makeRoom(pagesFor(plan.feeds))) {
    const auto newest =
        std::find_if(running.rbegin(), running.rend(), [](const auto& entry) { return entry.second.steps(); });
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
  park(slot);
  slot.state->truncate(0);
  slot.held.clear();
  r.toFeed.clear();
  r.drafts.clear();
  r.marks.clear();
  r.preempted = true;
  ++preemptions;
}

void Engine::Impl::resumeWaiting() {
  for (auto& [id, r] : running) {
    if (!r.preempted) continue;
    const auto stepping =
        std::count_if(running.begin(), running.end(), [](const auto& entry) { return entry.second.steps(); });
    const std::vector<TokenId> tokens = r.sequence();
    const int64_t page = pool->pageTokens();
    const int64_t pages = (static_cast<int64_t>(tokens.size()) + page - 1) / page;
    // With none stepping it starts regardless: alone it fits. A later one never starts before it.
    if (!makeRoom(pages + stepping) && stepping > 0) return;
    slots[r.slot].busy = false;  // its own slot is one that seat may take again
    r.slot = seat(tokens);
    r.preempted = false;
    r.resumed = true;
    takeHead(r, id);
    readRest(r);
  }
}

}  // namespace gizml::llm
