// The engine: slots holding sequence states, running requests stepped together (one forward
// pass per step for all of them), and generate on top of add/advance.
#include <gizml/error.h>
#include <gizml/llm.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "core/page_memory.h"
#include "llm/engine/grammar_constraint.h"
#include "llm/engine/prefill_budget.h"
#include "llm/engine/sampling.h"
#include "llm/engine/stop_text.h"
#include "llm/language_model.h"

namespace gizml::llm {

const char* finishName(Finish f) {
  switch (f) {
    case Finish::Running: return "running";
    case Finish::Length: return "length";
    case Finish::EndOfTurn: return "end of turn";
    case Finish::Stop: return "stop";
    case Finish::Cancelled: return "cancelled";
  }
  return "?";
}

namespace {

struct Slot {
  std::unique_ptr<SequenceState> state;  // made on first use
  std::vector<TokenId> held;             // the tokens the state holds
  bool busy = false;
  uint64_t used = 0;                     // when a request last started here (0: never)
};

struct Running {
  size_t slot = 0;
  Request request;
  std::vector<TokenId> toFeed;  // the prompt's unread rest, then the last token drawn
  std::vector<int64_t> marks;   // the request's marks within toFeed, for its first step
  std::vector<TokenId> drafts;  // guessed after toFeed, verified in this step's pass
  int64_t drafted = 0, accepted = 0;
  std::vector<TokenId> generated;
  std::optional<StopText> text;  // with the engine's tokenizer: Progress::text
  std::optional<GrammarConstraint> grammar;  // only with a grammar
  int64_t cached = 0;           // prompt tokens its slot held already
  int leader = -1;              // a later choice of n: waits for this request's prompt, then copies it
  std::vector<int> followers;   // the choices waiting for this one's prompt
  int headLeader = -1;          // waits for this request to read the head of its prompt (Request::head)
};

// A shared start of prompts (Request::head): read once, by its leader's request, then kept in a
// state of its own whose pages every request that starts with it shares.
struct Head {
  std::vector<TokenId> tokens;
  std::unique_ptr<SequenceState> state;  // null while its leader reads it
  int leader = -1;
  uint64_t used = 0;
};

// Heads shorter than this are read again rather than kept: a page's worth.
constexpr size_t kMinHead = 256;

// A chat moved out of its slot when another request took the slot (or the pool ran short): its
// tokens and a copy of its state in host memory of its own, until a request that starts with
// them takes it back.
struct Parked {
  std::vector<TokenId> held;
  std::unique_ptr<SequenceState> state;
  int64_t bytes = 0;
};

// Chats shorter than this are read again rather than moved out.
constexpr size_t kMinParked = 16;

size_t commonPrefix(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

}  // namespace

struct Engine::Impl {
  std::shared_ptr<LanguageModel> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<TokenId> endOfTurn;
  int64_t maxTokens = 0;
  int drafts = 2;
  std::vector<Slot> slots;
  std::shared_ptr<StatePool> pool;  // the slots' keys and values, where the model keeps pages
  uint64_t clock = 0;               // counts the requests started, for Slot::used and Head::used
  std::vector<Head> heads;          // at most one per slot
  std::optional<bool> statesCopy;   // whether the model's states copy (found at the first head)
  std::deque<Parked> parked;        // oldest first
  int64_t parkedBytes = 0;
  int64_t parkLimit = -1;           // Engine::setHostCache
  std::map<int, Running> running;  // by id, so steps feed in a fixed order
  int nextId = 0;
  std::unique_ptr<GrammarTokens> grammarTokens;  // made for the first request with a grammar
  bool budgeted = true;  // prompts beside decoding requests are read in parts (setPrefillBudget)
  PrefillBudget budget;

  void validate(const Request& r) const {
    check(model->hasLogits(), "engine: the model was loaded with only its first " +
                                  std::to_string(model->config().numLayers) +
                                  " layers (LoadOptions::layers); it gives hidden states, not text");
    check(!r.prompt.empty(), "request: the prompt is empty");
    check(static_cast<int64_t>(r.prompt.size()) <= maxTokens,
          "request: the prompt's " + std::to_string(r.prompt.size()) + " tokens exceed the engine's " +
              std::to_string(maxTokens) + "-token context");
    const int64_t vocab = model->config().vocabSize;
    for (TokenId t : r.prompt)
      check(t >= 0 && t < vocab, "request: prompt token " + std::to_string(t) + " is outside the vocabulary of " +
                                     std::to_string(vocab));
    for (const auto& [t, bias] : r.sampling.logitBias)
      check(t >= 0 && t < vocab, "request: logit bias token " + std::to_string(t) + " is outside the vocabulary of " +
                                     std::to_string(vocab));
    check(r.limit > 0, "request: limit " + std::to_string(r.limit) + " must be positive");
    validateSampling(r.sampling);
    for (const std::string& s : r.stop) check(!s.empty(), "request: a stop string is empty");
    check(r.head <= r.prompt.size(), "request: head " + std::to_string(r.head) + " is past the prompt's " +
                                         std::to_string(r.prompt.size()) + " tokens");
    for (size_t i = 0; i < r.marks.size(); ++i)
      check(r.marks[i] > 0 && r.marks[i] <= r.prompt.size() && (i == 0 || r.marks[i] > r.marks[i - 1]),
            "request: mark " + std::to_string(r.marks[i]) + " is not an ascending length within the prompt's " +
                std::to_string(r.prompt.size()) + " tokens");
    check(r.stop.empty() || tokenizer, "request: stop strings need the engine's tokenizer");
    check(!r.sampling.grammar || tokenizer, "request: a grammar needs the engine's tokenizer");
  }

  // Where a request starts: a free slot, and the slot (busy or not) holding the longest start of
  // its prompt, whose state the free one copies (sharing its pages) when it is another. The free
  // slot is one whose tokens are all a start of the prompt (the longest: it loses nothing), else
  // the one used least recently, so that other chats keep what they hold.
  struct Place {
    size_t slot;
    std::optional<size_t> source;
  };
  std::optional<Place> place(const std::vector<TokenId>& prompt) const {
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

  std::unique_ptr<SequenceState> newState() const {
    return pool ? model->newStateIn(pool, maxTokens) : model->newState(maxTokens);
  }

  Slot& withState(Slot& slot) {
    if (!slot.state) slot.state = newState();
    return slot;
  }

  // The most pages a pass over `feeds` takes: those past the pages that hold each state's
  // positions now, and a copy of its last one (which it may share).
  int64_t pagesFor(const std::vector<Feed>& feeds) const {
    const int64_t page = pool->pageTokens();
    int64_t need = 0;
    for (const Feed& f : feeds) {
      const int64_t length = f.state->length(), end = length + static_cast<int64_t>(f.tokens.size());
      need += (end + page - 1) / page - (length + page - 1) / page + (length % page != 0 ? 1 : 0);
    }
    return need;
  }

  // Frees pool pages until `need` are free: idle slots (but `keep`) move out to host memory and
  // give theirs back, least recently used first, then kept heads leave. Whether enough are free.
  bool makeRoom(int64_t need, const Slot* keep = nullptr) {
    if (!pool) return true;
    std::vector<size_t> idle;
    for (size_t i = 0; i < slots.size(); ++i)
      if (!slots[i].busy && &slots[i] != keep && slots[i].state && slots[i].state->length() > 0) idle.push_back(i);
    std::sort(idle.begin(), idle.end(), [&](size_t a, size_t b) { return slots[a].used < slots[b].used; });
    for (size_t i : idle) {
      if (pool->freePages() >= need) break;
      park(slots[i]);
      slots[i].state->truncate(0);
      slots[i].held.clear();
    }
    while (pool->freePages() < need && dropHead()) {
    }
    return pool->freePages() >= need;
  }

  // Whether another slot, head or parked chat holds all that `held` holds.
  bool heldElsewhere(const Slot& slot) const {
    const auto covers = [&](const std::vector<TokenId>& other) {
      return &other != &slot.held && other.size() >= slot.held.size() && startsWith(other, slot.held);
    };
    return std::any_of(slots.begin(), slots.end(), [&](const Slot& s) { return covers(s.held); }) ||
           std::any_of(heads.begin(), heads.end(), [&](const Head& h) { return h.state && covers(h.tokens); }) ||
           std::any_of(parked.begin(), parked.end(), [&](const Parked& p) { return covers(p.held); });
  }

  // Moves what an idle slot holds to host memory before it is overwritten, within the limit
  // (setHostCache), the oldest parked chats leaving first to make room.
  void park(const Slot& slot) {
    if (!slot.state || slot.held.size() < kMinParked || parkLimit == 0 || heldElsewhere(slot)) return;
    const int64_t bytes = slot.state->memoryBytes();
    const int64_t limit = parkLimit > 0 ? parkLimit : parkedBytes + core::availableMemory() / 2;
    if (bytes > limit) return;
    while (!parked.empty() && parkedBytes + bytes > limit) {
      parkedBytes -= parked.front().bytes;
      parked.pop_front();
    }
    std::unique_ptr<SequenceState> copy = model->newState(maxTokens);  // memory of its own
    if (!copy->copyFrom(*slot.state)) return;
    parked.push_back({slot.held, std::move(copy), bytes});
    parkedBytes += bytes;
  }

  // The parked chat holding the longest start of prompt comes back into `slot` where that is
  // more than the slot holds.
  void unpark(Slot& slot, const std::vector<TokenId>& prompt) {
    auto best = parked.end();
    size_t longest = commonPrefix(slot.held, prompt);
    for (auto it = parked.begin(); it != parked.end(); ++it)
      if (const size_t shared = commonPrefix(it->held, prompt); shared > longest) longest = shared, best = it;
    if (best == parked.end()) return;
    const int64_t pages = pool ? (static_cast<int64_t>(best->held.size()) + pool->pageTokens() - 1) / pool->pageTokens() : 0;
    if (!makeRoom(pages, &slot) || !slot.state->copyFrom(*best->state)) return;
    slot.held = std::move(best->held);
    parkedBytes -= best->bytes;
    parked.erase(best);
  }

  // r reads what its slot does not hold of its prompt, and at least the last token (its logits).
  void readRest(Running& r) {
    Slot& slot = slots[r.slot];
    const std::vector<TokenId>& prompt = r.request.prompt;
    const auto shared = static_cast<int64_t>(std::min(commonPrefix(slot.held, prompt), prompt.size() - 1));
    const auto keep = static_cast<size_t>(slot.state->reusable(shared));
    slot.state->truncate(static_cast<int64_t>(keep));
    slot.held.resize(keep);
    r.cached = static_cast<int64_t>(keep);
    r.toFeed.assign(prompt.begin() + static_cast<std::ptrdiff_t>(keep), prompt.end());
    r.marks.clear();
    for (size_t mark : r.request.marks)
      if (mark > keep) r.marks.push_back(static_cast<int64_t>(mark));
  }

  bool startsWith(const std::vector<TokenId>& prompt, const std::vector<TokenId>& head) const {
    return head.size() <= prompt.size() && std::equal(head.begin(), head.end(), prompt.begin());
  }

  // Request `id` (r) starts from the longest kept head its prompt starts with where that is more
  // than its slot holds; a head it names (Request::head) that is not kept it waits for while
  // another request reads it, or reads itself, to be kept after.
  void takeHead(Running& r, int id) {
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

  // Drops the least recently used kept head (its pages go back where no slot shares them).
  bool dropHead() {
    auto oldest = heads.end();
    for (auto it = heads.begin(); it != heads.end(); ++it)
      if (it->state && (oldest == heads.end() || it->used < oldest->used)) oldest = it;
    if (oldest == heads.end()) return false;
    heads.erase(oldest);
    return true;
  }

  // After a pass: each head whose leader has read it is kept (a copy of the leader's state cut
  // at the head), and the requests waiting for it start from it.
  void settleHeads() {
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

  // A cancelled request that was reading a head hands it to the first request waiting for it.
  void handOnHead(int cancelled) {
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

  void release(Running& r) { slots[r.slot].busy = false; }
  int addOne(const Request& request);

  // After a failed forward pass the states may hold part of a step: start them afresh.
  void resetAll() {
    for (auto& [id, r] : running) {
      Slot& slot = slots[r.slot];
      if (slot.state) slot.state->truncate(0);
      slot.held.clear();
      slot.busy = false;
    }
    running.clear();
    std::erase_if(heads, [](const Head& h) { return !h.state; });
  }

  /// The feed of a running request: the first `rows` of the tokens it has to read, and drafts
  /// after them when it decodes. A prompt's part carries the marks within it, the rest wait for
  /// theirs, and asks for no logits: no token follows it yet.
  Feed feedOf(Running& r, size_t rows) {
    Slot& slot = slots[r.slot];
    const int64_t length = slot.state->length();
    const bool whole = rows == r.toFeed.size();
    Feed feed{slot.state.get(), std::vector<TokenId>(r.toFeed.begin(), r.toFeed.begin() + static_cast<std::ptrdiff_t>(rows))};
    feed.logits = whole;
    const auto past = std::upper_bound(r.marks.begin(), r.marks.end(), length + static_cast<int64_t>(rows));
    feed.marks.assign(r.marks.begin(), past);
    r.marks.erase(r.marks.begin(), past);
    r.drafts.clear();
    const int64_t room = std::min(slot.state->capacity() - length - 1,
                                  r.request.limit - static_cast<int64_t>(r.generated.size()) - 1);
    // Drafts the model keeps too rarely only cost time: after 16, a request drafts on while at
    // least a quarter are kept.
    const bool worthIt = r.drafted < 16 || r.accepted * 4 >= r.drafted;
    if (drafts > 0 && worthIt && whole && r.toFeed.size() == 1 && !r.generated.empty() && room > 0 && model->drafts()) {
      const size_t recent = std::min<size_t>(slot.held.size(), 256);
      r.drafts = model->draft(*slot.state, r.toFeed[0], std::min<int64_t>(drafts, room),
                              std::span<const TokenId>(slot.held).last(recent));
      feed.tokens.insert(feed.tokens.end(), r.drafts.begin(), r.drafts.end());
      feed.allLogits = !r.drafts.empty();
      // Recurrent states are kept after each guess, to go back to the last one accepted.
      for (size_t i = 1; i <= r.drafts.size(); ++i) feed.marks.push_back(length + static_cast<int64_t>(i));
    }
    return feed;
  }

  /// A step's feeds, in the requests' order.
  struct Plan {
    std::vector<int> ids;  // the requests fed: not the choices waiting for a prompt, nor prompts left for later steps
    std::vector<Feed> feeds;
    int64_t decodeRows = 0, promptRows = 0;
  };

  /// Every decoding request's feed and the prompts': whole, or beside decoding requests with the
  /// budget on, the parts its rows allow, first come first (vLLM's chunked prefill).
  Plan plan() {
    std::map<int, Feed> decoding;  // first: their rows set the prompts' budget
    int64_t decodeRows = 0;
    for (auto& [id, r] : running)
      if (r.leader < 0 && !r.generated.empty()) {
        Feed feed = feedOf(r, r.toFeed.size());
        decodeRows += static_cast<int64_t>(feed.tokens.size());
        decoding.emplace(id, std::move(feed));
      }
    const int64_t allowed =
        budgeted && decodeRows > 0 ? budget.rows(decodeRows) : std::numeric_limits<int64_t>::max();
    Plan plan;
    plan.decodeRows = decodeRows;
    for (auto& [id, r] : running) {
      if (r.leader >= 0 || r.headLeader >= 0) continue;  // waiting for another's prompt or head
      if (const auto d = decoding.find(id); d != decoding.end()) {
        plan.ids.push_back(id);
        plan.feeds.push_back(std::move(d->second));
        continue;
      }
      const int64_t rows = std::min(static_cast<int64_t>(r.toFeed.size()), allowed - plan.promptRows);
      if (rows <= 0) continue;
      plan.ids.push_back(id);
      plan.feeds.push_back(feedOf(r, static_cast<size_t>(rows)));
      plan.promptRows += rows;
    }
    return plan;
  }

  /// A part of r's prompt was read: its slot holds it, so the request goes on after it (and a
  /// request that starts the same way after a cancel reuses it).
  void readPart(Running& r, size_t rows) {
    Slot& slot = slots[r.slot];
    const auto end = r.toFeed.begin() + static_cast<std::ptrdiff_t>(rows);
    slot.held.insert(slot.held.end(), r.toFeed.begin(), end);
    r.toFeed.erase(r.toFeed.begin(), end);
  }

  /// The tokens of one step from its logit rows: one, or with drafts each draft that the row
  /// before it confirms and then the row's own token; the state forgets the drafts not kept.
  Finish stepRows(Running& r, std::vector<float>& values, size_t vocab, Progress& p) {
    Slot& slot = slots[r.slot];
    const int64_t fedFrom = slot.state->length() - static_cast<int64_t>(r.toFeed.size() + r.drafts.size());
    Finish finish = Finish::Running;
    size_t kept = 0;
    for (size_t i = 0; i <= r.drafts.size(); ++i) {
      const std::optional<TokenId> draft = i < r.drafts.size() ? std::optional(r.drafts[i]) : std::nullopt;
      const size_t rowAt = r.drafts.empty() ? values.size() - vocab : i * vocab;
      finish = step(r, std::span<float>(values).subspan(rowAt, vocab), p, draft);
      if (!draft || r.generated.back() != *draft) break;
      ++kept;
      if (finish != Finish::Running) break;
    }
    p.drafted += static_cast<int64_t>(r.drafts.size());
    p.accepted += static_cast<int64_t>(kept);
    r.drafted += static_cast<int64_t>(r.drafts.size());
    r.accepted += static_cast<int64_t>(kept);
    if (!r.drafts.empty()) {
      const int64_t held = static_cast<int64_t>(slot.held.size());
      if (held < slot.state->length()) slot.state->truncate(held);
      slot.state->forgetKept(fedFrom);
    }
    return finish;
  }

  /// The choices waiting for leader's prompt continue from a copy of its state and draw their
  /// first tokens from copies of its logits row (taken before the leader's step changed it);
  /// where the state does not copy, a choice reads the prompt itself from the next step on.
  void fork(Running& leader, const std::vector<int>& followers, const std::vector<float>& row,
            std::vector<Progress>& out) {
    const Slot& from = slots[leader.slot];
    for (int id : followers) {
      const auto it = running.find(id);
      if (it == running.end()) continue;  // cancelled meanwhile
      Running& f = it->second;
      f.leader = -1;
      Slot& slot = slots[f.slot];
      if (!slot.state->copyFrom(*from.state)) continue;
      slot.held = from.held;
      f.toFeed.clear();
      f.marks.clear();
      Progress p;
      p.request = id;
      std::vector<float> values = row;
      const Finish finish = p.finish = step(f, values, p, std::nullopt);
      out.push_back(std::move(p));
      if (finish != Finish::Running) {
        release(f);
        running.erase(it);
      }
    }
  }

  Finish step(Running& r, std::span<float> row, Progress& p, std::optional<TokenId> draft) {
    Slot& slot = slots[r.slot];
    slot.held.insert(slot.held.end(), r.toFeed.begin(), r.toFeed.end());
    const Sampling& s = r.request.sampling;
    applyPenalties(row, s, r.request.prompt, r.generated);
    applyLogitBias(row, s);
    if (r.grammar) r.grammar->constrain(row, *grammarTokens, s.temperature == 0.0 && s.logprobs < 0);
    const uint64_t index = r.generated.size();
    const TokenId token = draft ? verifyDraft(row, s, index, *draft) : chooseToken(row, s, index);
    if (r.grammar) r.grammar->accept(token, *grammarTokens);
    if (s.logprobs >= 0) p.logprobs.push_back(logprobOf(row, token, s.logprobs));
    r.generated.push_back(token);
    p.tokens.push_back(token);
    r.toFeed.assign(1, token);
    if (std::find(endOfTurn.begin(), endOfTurn.end(), token) != endOfTurn.end()) return ended(r, p, Finish::EndOfTurn);
    if (r.text) {
      p.text += r.text->push(token);
      if (r.text->stopped()) return Finish::Stop;
    }
    if (static_cast<int64_t>(r.generated.size()) >= r.request.limit) return ended(r, p, Finish::Length);
    if (static_cast<int64_t>(slot.held.size()) >= slot.state->capacity()) return ended(r, p, Finish::Length);
    return Finish::Running;
  }

  // A request ends with no stop string found: the text held back in case one began goes out.
  static Finish ended(Running& r, Progress& p, Finish finish) {
    if (r.text) p.text += r.text->finish();
    return finish;
  }
};

Engine::Engine(std::shared_ptr<LanguageModel> model, std::shared_ptr<const Tokenizer> tokenizer,
               std::vector<TokenId> endOfTurn, int slots, int64_t maxTokens, int64_t poolTokens)
    : impl_(std::make_unique<Impl>()) {
  check(model != nullptr, "engine: no model");
  check(slots > 0, "engine: slots " + std::to_string(slots) + " must be positive");
  check(maxTokens > 0, "engine: maxTokens " + std::to_string(maxTokens) + " must be positive");
  check(poolTokens >= 0, "engine: a KV pool of " + std::to_string(poolTokens) + " tokens is not a size");
  if (const int64_t page = model->pageTokens(); page > 0) {
    const int64_t perSlot = (maxTokens + page - 1) / page;
    const int64_t pages = poolTokens > 0 ? (poolTokens + page - 1) / page : perSlot * slots;
    check(pages >= perSlot, "engine: a KV pool of " + std::to_string(poolTokens) + " tokens (" + std::to_string(pages) +
                                " pages of " + std::to_string(page) + ") cannot hold one slot's context of " +
                                std::to_string(maxTokens) + " tokens");
    impl_->pool = model->newPool(pages);
  }
  impl_->model = std::move(model);
  impl_->tokenizer = std::move(tokenizer);
  impl_->endOfTurn = std::move(endOfTurn);
  impl_->maxTokens = maxTokens;
  impl_->slots.resize(static_cast<size_t>(slots));
}

Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

void Engine::setDrafts(int count) {
  check(count >= 0, "engine: drafts " + std::to_string(count) + " must not be negative");
  impl_->drafts = count;
}

void Engine::setPrefillBudget(bool on) { impl_->budgeted = on; }

int Engine::running() const { return static_cast<int>(impl_->running.size()); }
int Engine::slots() const { return static_cast<int>(impl_->slots.size()); }
int64_t Engine::maxTokens() const { return impl_->maxTokens; }

int64_t Engine::poolTokens() const { return impl_->pool ? impl_->pool->pages() * impl_->pool->pageTokens() : 0; }
int64_t Engine::poolBytes() const { return impl_->pool ? impl_->pool->bytes() : 0; }
int64_t Engine::poolPagesUsed() const { return impl_->pool ? impl_->pool->pages() - impl_->pool->freePages() : 0; }

void Engine::setHostCache(int64_t bytes) {
  check(bytes >= -1, "engine: host cache of " + std::to_string(bytes) + " bytes is not a size (-1: automatic)");
  Impl& m = *impl_;
  m.parkLimit = bytes;
  while (!m.parked.empty() && bytes >= 0 && m.parkedBytes > bytes) {
    m.parkedBytes -= m.parked.front().bytes;
    m.parked.pop_front();
  }
}

int64_t Engine::hostCacheBytes() const { return impl_->parkedBytes; }

int Engine::freeSlots() const {
  return static_cast<int>(std::count_if(impl_->slots.begin(), impl_->slots.end(), [](const Slot& s) { return !s.busy; }));
}

int Engine::add(const Request& request) { return add(request, 1)[0]; }

std::vector<int> Engine::add(const Request& request, int choices) {
  Impl& m = *impl_;
  m.validate(request);
  check(choices > 0, "engine: choices " + std::to_string(choices) + " must be positive");
  const int free = freeSlots(), slots = static_cast<int>(m.slots.size());
  check(free > 0, "engine: all " + std::to_string(slots) + " slots are busy");
  check(free >= choices, "engine: " + std::to_string(choices) + " choices need as many free slots, " +
                             std::to_string(free) + " of " + std::to_string(slots) + " are free");
  std::vector<int> ids;
  for (int i = 0; i < choices; ++i) {
    Request choice = request;
    choice.sampling.seed += static_cast<uint64_t>(i);
    if (i > 0) choice.head = 0;  // the later choices copy choice 0's whole prompt
    ids.push_back(m.addOne(choice));
    if (i > 0) {
      m.running.at(ids.back()).leader = ids[0];
      m.running.at(ids[0]).followers.push_back(ids.back());
    }
  }
  return ids;
}

int Engine::Impl::addOne(const Request& request) {
  Impl& m = *this;
  const std::optional<Place> place = m.place(request.prompt);
  check(place.has_value(), "engine: all " + std::to_string(m.slots.size()) + " slots are busy");
  size_t index = place->slot;
  const std::vector<TokenId>& prompt = request.prompt;
  if (commonPrefix(m.slots[index].held, prompt) < m.slots[index].held.size()) m.park(m.slots[index]);
  if (place->source && *place->source != index &&
      commonPrefix(m.slots[*place->source].held, request.prompt) > commonPrefix(m.slots[index].held, request.prompt)) {
    Slot& from = m.slots[*place->source];
    if (m.withState(m.slots[index]).state->copyFrom(*from.state)) m.slots[index].held = from.held;
    else if (!from.busy) index = *place->source;  // states that do not copy: read on in the source itself
  }
  Slot& slot = m.withState(m.slots[index]);
  m.unpark(slot, prompt);
  slot.busy = true;
  slot.used = ++m.clock;

  const int id = m.nextId++;
  Running r;
  r.slot = index;
  r.request = request;
  m.takeHead(r, id);
  m.readRest(r);
  if (m.tokenizer) r.text.emplace(*m.tokenizer, request.stop);
  if (request.sampling.grammar) {
    if (!m.grammarTokens) m.grammarTokens = std::make_unique<GrammarTokens>(*m.tokenizer, m.endOfTurn);
    r.grammar.emplace(request.sampling);
  }
  m.running.emplace(id, std::move(r));
  return id;
}

std::vector<Progress> Engine::advance() {
  Impl& m = *impl_;
  if (m.running.empty()) return {};
  Impl::Plan plan = m.plan();
  std::vector<tensor::Tensor> logits;
  try {
    if (m.pool) m.makeRoom(m.pagesFor(plan.feeds));
    const auto start = std::chrono::steady_clock::now();
    logits = m.model->forward(plan.feeds);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    check(logits.size() == plan.feeds.size(), "engine: the model gave " + std::to_string(logits.size()) +
                                                  " logit rows for " + std::to_string(plan.feeds.size()) + " sequences");
    m.budget.measured(plan.decodeRows, plan.promptRows, seconds);
  } catch (...) {
    m.resetAll();
    throw;
  }
  m.settleHeads();
  std::vector<Progress> out;
  for (size_t i = 0; i < plan.ids.size(); ++i) {
    const auto it = m.running.find(plan.ids[i]);
    Running& r = it->second;
    if (!plan.feeds[i].logits) {  // a part of its prompt: no token yet
      m.readPart(r, plan.feeds[i].tokens.size());
      continue;
    }
    Progress p;
    p.request = plan.ids[i];
    p.cached = r.cached;
    std::vector<float> values = logits[i].toFloats();
    const std::vector<float> shared = r.followers.empty() ? std::vector<float>() : values;
    const Finish finish = p.finish = m.stepRows(r, values, static_cast<size_t>(logits[i].size(-1)), p);
    out.push_back(std::move(p));
    if (!r.followers.empty()) m.fork(r, std::exchange(r.followers, {}), shared, out);
    if (finish != Finish::Running) {
      m.release(r);
      m.running.erase(it);
    }
  }
  return out;
}

void Engine::cancel(int request) {
  const auto it = impl_->running.find(request);
  if (it == impl_->running.end()) return;
  for (int id : it->second.followers)  // they read the prompt themselves
    if (const auto f = impl_->running.find(id); f != impl_->running.end()) f->second.leader = -1;
  impl_->handOnHead(request);
  impl_->release(it->second);
  impl_->running.erase(it);
}

tensor::Tensor Engine::hidden(const std::vector<TokenId>& prompt) const {
  check(!prompt.empty(), "hidden: the prompt is empty");
  check(static_cast<int64_t>(prompt.size()) <= impl_->maxTokens,
        "hidden: the prompt's " + std::to_string(prompt.size()) + " tokens exceed the engine's " +
            std::to_string(impl_->maxTokens) + "-token context");
  return impl_->model->hidden(prompt);
}

std::vector<Result> Engine::generate(const std::vector<Request>& requests) {
  for (const Request& r : requests) impl_->validate(r);
  std::vector<Result> results(requests.size());
  std::map<int, size_t> index;  // engine id -> request
  size_t next = 0;
  while (next < requests.size() || !index.empty()) {
    while (next < requests.size() && running() < slots()) index[add(requests[next])] = next, ++next;
    for (Progress& p : advance()) {
      const auto it = index.find(p.request);
      if (it == index.end()) continue;  // a request added by someone else
      Result& r = results[it->second];
      r.tokens.insert(r.tokens.end(), p.tokens.begin(), p.tokens.end());
      r.text += p.text;
      for (TokenLogprob& l : p.logprobs) r.logprobs.push_back(std::move(l));
      r.drafted += p.drafted;
      r.accepted += p.accepted;
      r.finish = p.finish;
      if (p.finish != Finish::Running) index.erase(it);
    }
  }
  return results;
}

}  // namespace gizml::llm
