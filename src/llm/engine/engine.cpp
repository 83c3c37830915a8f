// The engine: slots holding sequence states, running requests stepped together (one forward
// pass per step for all of them), and generate on top of add/advance.
#include <gizml/error.h>
#include <gizml/llm.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <utility>

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
};

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
    for (size_t i = 0; i < r.marks.size(); ++i)
      check(r.marks[i] > 0 && r.marks[i] <= r.prompt.size() && (i == 0 || r.marks[i] > r.marks[i - 1]),
            "request: mark " + std::to_string(r.marks[i]) + " is not an ascending length within the prompt's " +
                std::to_string(r.prompt.size()) + " tokens");
    check(r.stop.empty() || tokenizer, "request: stop strings need the engine's tokenizer");
    check(!r.sampling.grammar || tokenizer, "request: a grammar needs the engine's tokenizer");
  }

  // The free slot holding the longest start of prompt (a chat's earlier turns), else any.
  std::optional<size_t> freeSlot(const std::vector<TokenId>& prompt) const {
    std::optional<size_t> best;
    size_t bestShared = 0;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].busy) continue;
      const size_t shared = commonPrefix(slots[i].held, prompt);
      if (!best || shared > bestShared) best = i, bestShared = shared;
    }
    return best;
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
      if (r.leader >= 0) continue;
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
               std::vector<TokenId> endOfTurn, int slots, int64_t maxTokens)
    : impl_(std::make_unique<Impl>()) {
  check(model != nullptr, "engine: no model");
  check(slots > 0, "engine: slots " + std::to_string(slots) + " must be positive");
  check(maxTokens > 0, "engine: maxTokens " + std::to_string(maxTokens) + " must be positive");
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
  const std::optional<size_t> index = m.freeSlot(request.prompt);
  check(index.has_value(), "engine: all " + std::to_string(m.slots.size()) + " slots are busy");
  Slot& slot = m.slots[*index];
  if (!slot.state) slot.state = m.model->newState(m.maxTokens);
  // Keep the shared start, but read at least the prompt's last token to have its logits.
  const auto shared = static_cast<int64_t>(std::min(commonPrefix(slot.held, request.prompt), request.prompt.size() - 1));
  const auto keep = static_cast<size_t>(slot.state->reusable(shared));
  slot.state->truncate(static_cast<int64_t>(keep));
  slot.held.resize(keep);
  slot.busy = true;

  Running r;
  r.slot = *index;
  r.request = request;
  r.cached = static_cast<int64_t>(keep);
  r.toFeed.assign(request.prompt.begin() + static_cast<std::ptrdiff_t>(keep), request.prompt.end());
  for (size_t mark : request.marks)
    if (mark > keep) r.marks.push_back(static_cast<int64_t>(mark));
  if (m.tokenizer) r.text.emplace(*m.tokenizer, request.stop);
  if (request.sampling.grammar) {
    if (!m.grammarTokens) m.grammarTokens = std::make_unique<GrammarTokens>(*m.tokenizer, m.endOfTurn);
    r.grammar.emplace(request.sampling);
  }
  const int id = m.nextId++;
  m.running.emplace(id, std::move(r));
  return id;
}

std::vector<Progress> Engine::advance() {
  Impl& m = *impl_;
  if (m.running.empty()) return {};
  Impl::Plan plan = m.plan();
  std::vector<tensor::Tensor> logits;
  try {
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
