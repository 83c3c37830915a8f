// Where a request starts and what the KV pool and host memory keep (Engine::Impl, engine_impl.h):
// the slot holding the longest start of a prompt, shared heads, chats moved to host memory and
// back, and room in the pool for a step.
#include "core/page_memory.h"
#include "llm/engine/engine_impl.h"

namespace gizml::llm {

std::optional<Engine::Impl::Place> Engine::Impl::place(const std::vector<TokenId>& prompt) const {
  std::optional<size_t> whole, leastUsed, source;
  size_t longest = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    const size_t shared = commonPrefix(s.held, prompt);
    if (shared > longest) longest = shared, source = i;
    if (s.busy) continue;
    if (shared == s.held.size() && (!whole || shared > slots[*whole].held.size())) whole = i;
    if (!leastUsed || s.used < slots[*leastUsed].used) leastUsed = i;
  }
  if (!leastUsed) return std::nullopt;
  return Place{whole ? *whole : *leastUsed, source};
}

size_t Engine::Impl::seat(const std::vector<TokenId>& tokens) {
  const std::optional<Place> place = this->place(tokens);
  check(place.has_value(), "engine: all " + std::to_string(slots.size()) + " slots are busy");
  size_t index = place->slot;
  if (commonPrefix(slots[index].held, tokens) < slots[index].held.size()) park(slots[index], true);
  if (place->source && *place->source != index &&
      commonPrefix(slots[*place->source].held, tokens) > commonPrefix(slots[index].held, tokens)) {
    Slot& from = slots[*place->source];
    if (withState(slots[index]).state->copyFrom(*from.state)) slots[index].held = from.held;
    else if (!from.busy) index = *place->source;  // states that do not copy: read on in the source itself
  }
  Slot& slot = withState(slots[index]);
  unpark(slot, tokens);
  // At most a chat a slot waits in the pool: a state may keep memory beside its pages (Qwen 3.5's
  // recurrent states), which the pool's size does not bound.
  const auto waiting = std::count_if(parked.begin(), parked.end(), [](const Parked& p) { return p.inPool; });
  for (auto excess = static_cast<int64_t>(waiting) - static_cast<int64_t>(slots.size()); excess > 0; --excess)
    oldestParkedToHost();
  slot.busy = true;
  slot.used = ++clock;
  return index;
}

std::unique_ptr<SequenceState> Engine::Impl::newState() const {
  return pool ? model->newStateIn(pool, maxTokens) : model->newState(maxTokens);
}

Engine::Impl::Slot& Engine::Impl::withState(Slot& slot) {
  if (!slot.state) slot.state = newState();
  return slot;
}

int64_t Engine::Impl::pagesFor(const std::vector<Feed>& feeds) const {
  int64_t need = 0;
  for (const Feed& f : feeds) need += f.state->pagesToAppend(static_cast<int64_t>(f.tokens.size()));
  return need;
}

bool Engine::Impl::makeRoom(int64_t need, const Slot* keep) {
  if (!pool || freeParkedPages(need)) return true;
  std::vector<size_t> idle;
  for (size_t i = 0; i < slots.size(); ++i)
    if (!slots[i].busy && &slots[i] != keep && slots[i].state && slots[i].state->length() > 0) idle.push_back(i);
  std::sort(idle.begin(), idle.end(), [&](size_t a, size_t b) { return slots[a].used < slots[b].used; });
  for (size_t i : idle) {
    if (pool->freePages() >= need) break;
    park(slots[i], false);
    slots[i].state->truncate(0);
    slots[i].held.clear();
  }
  while (pool->freePages() < need && dropHead()) {
  }
  return pool->freePages() >= need;
}

bool Engine::Impl::freeParkedPages(int64_t need) {
  while (pool->freePages() < need)
    if (!oldestParkedToHost()) return false;
  return true;
}

bool Engine::Impl::oldestParkedToHost() {
  const auto oldest = std::find_if(parked.begin(), parked.end(), [](const Parked& p) { return p.inPool; });
  if (oldest == parked.end()) return false;
  const Parked out = std::move(*oldest);
  parked.erase(oldest);
  parkInHost(out.held, *out.state);
  return true;
}

bool Engine::Impl::heldElsewhere(const Slot& slot) const {
  const auto covers = [&](const std::vector<TokenId>& other) {
    return &other != &slot.held && other.size() >= slot.held.size() && startsWith(other, slot.held);
  };
  return std::any_of(slots.begin(), slots.end(), [&](const Slot& s) { return covers(s.held); }) ||
         std::any_of(heads.begin(), heads.end(), [&](const Head& h) { return h.state && covers(h.tokens); }) ||
         std::any_of(parked.begin(), parked.end(), [&](const Parked& p) { return covers(p.held); });
}

void Engine::Impl::park(const Slot& slot, bool inPool) {
  if (!slot.state || slot.held.size() < kMinParked || heldElsewhere(slot)) return;
  // In the pool, nothing is copied until the pool needs the pages: two chats taking turns on one
  // slot spent 13 % of each turn copying the other chat out to host memory and this one back
  // (bench/serve_turns.py, docs/benchmarks.md).
  if (inPool && pool) {
    std::unique_ptr<SequenceState> shared = newState();
    if (shared->copyFrom(*slot.state)) {
      parked.push_back({slot.held, std::move(shared), 0, true});
      return;
    }
  }
  parkInHost(slot.held, *slot.state);
}

void Engine::Impl::parkInHost(const std::vector<TokenId>& held, const SequenceState& state) {
  if (parkLimit == 0) return;
  const int64_t bytes = state.memoryBytes();
  const int64_t limit = parkLimit > 0 ? parkLimit : parkedBytes + core::availableMemory() / 2;
  if (bytes > limit) return;
  trimHostCache(limit - bytes);
  // Host memory of its own (whatever the model's device), keys and values as the pool keeps them,
  // in as many pages as the state holds: a pool of the whole context's pages zeroed 47 MB for
  // each chat parked (SmolLM2, 4,096 tokens, 8-bit keys and values), 3.5 % of a served batch.
  std::unique_ptr<SequenceState> copy;
  if (pool) {
    const int64_t pages = (state.length() + pool->pageTokens() - 1) / pool->pageTokens();
    copy = model->newStateIn(model->newPool(pages, pool->format(), true), maxTokens);
  } else {
    copy = model->newState(maxTokens);
  }
  if (!copy->copyFrom(state)) return;
  parked.push_back({held, std::move(copy), bytes, false});
  parkedBytes += bytes;
}

void Engine::Impl::trimHostCache(int64_t bytes) {
  for (auto it = parked.begin(); it != parked.end() && parkedBytes > bytes;) {
    if (it->inPool) {
      ++it;
      continue;
    }
    parkedBytes -= it->bytes;
    it = parked.erase(it);
  }
}

void Engine::Impl::unpark(Slot& slot, const std::vector<TokenId>& prompt) {
  auto best = parked.end();
  size_t longest = commonPrefix(slot.held, prompt);
  for (auto it = parked.begin(); it != parked.end(); ++it)
    if (const size_t shared = commonPrefix(it->held, prompt); shared > longest) longest = shared, best = it;
  if (best == parked.end()) return;
  // Out of the deque first: making room may park other chats (and move or drop parked ones).
  Parked back = std::move(*best);
  parked.erase(best);
  parkedBytes -= back.bytes;
  // The slot's own pages go back first: what it held is parked, held elsewhere, or a shorter start.
  slot.state->truncate(0);
  slot.held.clear();
  // One in the pool shares its pages; one in host memory takes as many.
  const int64_t pages = back.inPool || !pool ? 0 : (static_cast<int64_t>(back.held.size()) + pool->pageTokens() - 1) / pool->pageTokens();
  if (makeRoom(pages, &slot) && slot.state->copyFrom(*back.state)) {
    slot.held = std::move(back.held);
    return;
  }
  parkedBytes += back.bytes;
  parked.push_back(std::move(back));
}

void Engine::Impl::readRest(Running& r) {
  Slot& slot = slots[r.slot];
  const std::vector<TokenId> tokens = r.sequence();
  const auto shared = static_cast<int64_t>(std::min(commonPrefix(slot.held, tokens), tokens.size() - 1));
  const auto keep = static_cast<size_t>(slot.state->reusable(shared));
  slot.state->truncate(static_cast<int64_t>(keep));
  slot.held.resize(keep);
  if (!r.resumed) r.cached = static_cast<int64_t>(keep);
  r.toFeed.assign(tokens.begin() + static_cast<std::ptrdiff_t>(keep), tokens.end());
  r.marks.clear();
  for (size_t mark : r.request.marks)
    if (mark > keep) r.marks.push_back(static_cast<int64_t>(mark));
}

bool Engine::Impl::startsWith(const std::vector<TokenId>& prompt, const std::vector<TokenId>& head) const {
  return head.size() <= prompt.size() && std::equal(head.begin(), head.end(), prompt.begin());
}

void Engine::Impl::takeHead(Running& r, int id) {
  Slot& slot = slots[r.slot];
  const std::vector<TokenId>& prompt = r.request.prompt;
  Head* best = nullptr;
  for (Head& h : heads)
    if (h.state && startsWith(prompt, h.tokens) && (!best || h.tokens.size() > best->tokens.size())) best = &h;
  if (best && best->tokens.size() > commonPrefix(slot.held, prompt) && slot.state->copyFrom(*best->state)) {
    slot.held = best->tokens;
    best->used = ++clock;
  }
  const size_t n = r.request.head;
  if (n < kMinHead || commonPrefix(slot.held, prompt) >= n) return;
  if (!statesCopy) statesCopy = newState()->copyFrom(*newState());
  if (!*statesCopy) return;
  const std::vector<TokenId> tokens(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(n));
  for (const Head& h : heads)
    if (!h.state && h.tokens == tokens) {
      r.headLeader = h.leader;
      return;
    }
  if (heads.size() >= slots.size() && !dropHead()) return;  // every kept head is being read
  heads.push_back({tokens, nullptr, id, ++clock});
}

bool Engine::Impl::dropHead() {
  auto oldest = heads.end();
  for (auto it = heads.begin(); it != heads.end(); ++it)
    if (it->state && (oldest == heads.end() || it->used < oldest->used)) oldest = it;
  if (oldest == heads.end()) return false;
  heads.erase(oldest);
  return true;
}

void Engine::Impl::settleHeads() {
  for (Head& h : heads) {
    if (h.state) continue;
    const auto leader = running.find(h.leader);
    if (leader == running.end()) continue;
    const SequenceState& read = *slots[leader->second.slot].state;
    if (read.length() < static_cast<int64_t>(h.tokens.size())) continue;
    h.state = newState();
    h.state->copyFrom(read);
    h.state->truncate(static_cast<int64_t>(h.tokens.size()));
    for (auto& [id, r] : running) {
      if (r.headLeader != h.leader) continue;
      r.headLeader = -1;
      Slot& slot = slots[r.slot];
      if (slot.state->copyFrom(*h.state)) slot.held = h.tokens;
      readRest(r);
    }
    h.used = ++clock;
  }
}

void Engine::Impl::handOnHead(int cancelled) {
  for (auto h = heads.begin(); h != heads.end(); ++h) {
    if (h->state || h->leader != cancelled) continue;
    int next = -1;
    for (auto& [id, r] : running)
      if (r.headLeader == cancelled) {
        if (next < 0) next = id;
        r.headLeader = id == next ? -1 : next;
      }
    if (next < 0) heads.erase(h);
    else h->leader = next;
    return;
  }
}

}  // namespace gizml::llm
