// The engine: slots holding sequence states, running requests stepped together (one forward
// pass per step for all of them), and generate on top of add/advance.
#include <chrono>
#include <limits>
#include <utility>

#include "core/page_memory.h"
#include "core/thread_pool.h"
#include "llm/engine/device_rows.h"
#include "llm/engine/engine_impl.h"
#include "llm/engine/kv_choice.h"
#include "llm/engine/sampling.h"

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

void Engine::Impl::validate(const Request& r) const {
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
  validatePictures(r);
  check(r.stop.empty() || tokenizer, "request: stop strings need the engine's tokenizer");
  check(!r.sampling.grammar || tokenizer, "request: a grammar needs the engine's tokenizer");
}

void Engine::Impl::validatePictures(const Request& r) const {
  int64_t end = 0;
  const auto n = static_cast<int64_t>(r.prompt.size());
  for (size_t i = 0; i < r.pictures.size(); ++i) {
    const Picture& p = r.pictures[i];
    const std::string what = "request: picture " + std::to_string(i) + ": ";
    checkPicture(p, model->config(), what);
    const int64_t rows = p.t * p.h * p.w;
    check(p.first >= end && p.first <= n - rows,
          what + "tokens " + std::to_string(p.first) + " to " + std::to_string(p.first + rows) +
              " are not within the prompt's " + std::to_string(n) + " tokens after the pictures before it");
    end = p.first + rows;
  }
  check(r.pictures.empty() || static_cast<int64_t>(r.head) <= r.pictures[0].first,
        "request: head " + std::to_string(r.head) + " ends past the first picture's start");
}

void Engine::Impl::resetAll() {
  for (auto& [id, r] : running) {
    Slot& slot = slots[r.slot];
    if (slot.state) slot.state->truncate(0);
    slot.held.clear();
    slot.busy = false;
  }
  running.clear();
  std::erase_if(heads, [](const Head& h) { return !h.state; });
}

Feed Engine::Impl::feedOf(Running& r, size_t rows) {
  Slot& slot = slots[r.slot];
  const int64_t length = slot.state->length();
  const bool whole = rows == r.toFeed.size();
  Feed feed{slot.state.get(), std::vector<TokenId>(r.toFeed.begin(), r.toFeed.begin() + static_cast<std::ptrdiff_t>(rows))};
  feed.logits = whole;
  // Pictures' rows: any valid token stands for them (the model reads the pictures' rows there).
  std::replace(feed.tokens.begin(), feed.tokens.end(), kPictureRow, TokenId{0});
  for (Picture p : r.request.pictures) {
    p.first -= length;
    if (p.first < static_cast<int64_t>(rows) && p.first + p.rows.size(0) > 0) feed.pictures.push_back(std::move(p));
  }
  const auto past = std::upper_bound(r.marks.begin(), r.marks.end(), length + static_cast<int64_t>(rows));
  feed.marks.assign(r.marks.begin(), past);
  r.marks.erase(r.marks.begin(), past);
  r.drafts.clear();
  const int64_t room = std::min(slot.state->capacity() - length - 1,
                                r.request.limit - static_cast<int64_t>(r.generated.size()) - 1);
  // Drafts the model keeps too rarely only cost time: after 16, a request drafts on while at
  // least a quarter are kept.
  const bool worthIt = r.drafted < 16 || r.accepted * 4 >= r.drafted;
  // A draft writes its guesses' keys into the pool: none where the pool lacks their pages once
  // parked chats have left it (the step then makes room for its feeds alone, preempting if it must).
  const int64_t guesses = std::min<int64_t>(drafts, room);
  const bool pagesFree = !pool || freeParkedPages(slot.state->pagesToAppend(1 + guesses));
  if (drafts > 0 && worthIt && whole && r.toFeed.size() == 1 && !r.generated.empty() && room > 0 && pagesFree &&
      model->drafts()) {
    std::vector<TokenId> recent(slot.held.end() - static_cast<std::ptrdiff_t>(std::min<size_t>(slot.held.size(), 256)),
                                slot.held.end());
    std::erase(recent, kPictureRow);
    r.drafts = model->draft(*slot.state, r.toFeed[0], guesses, recent);
    feed.tokens.insert(feed.tokens.end(), r.drafts.begin(), r.drafts.end());
    feed.allLogits = !r.drafts.empty();
    // Recurrent states are kept after each guess, to go back to the last one accepted.
    for (size_t i = 1; i <= r.drafts.size(); ++i) feed.marks.push_back(length + static_cast<int64_t>(i));
  }
  return feed;
}

Engine::Impl::Plan Engine::Impl::plan() {
  std::map<int, Feed> decoding;  // first: their rows set the prompts' budget
  int64_t decodeRows = 0;
  for (auto& [id, r] : running)
    if (r.decodes()) {
      Feed feed = feedOf(r, r.toFeed.size());
      decodeRows += static_cast<int64_t>(feed.tokens.size());
      decoding.emplace(id, std::move(feed));
    }
  const int64_t allowed = budgeted && decodeRows > 0 ? budget.rows(decodeRows) : kPromptRowsPerStep;
  Plan plan;
  plan.decodeRows = decodeRows;
  for (auto& [id, r] : running) {
    if (!r.steps()) continue;
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

void Engine::Impl::readPart(Running& r, size_t rows) {
  Slot& slot = slots[r.slot];
  const auto end = r.toFeed.begin() + static_cast<std::ptrdiff_t>(rows);
  slot.held.insert(slot.held.end(), r.toFeed.begin(), end);
  r.toFeed.erase(r.toFeed.begin(), end);
}

Finish Engine::Impl::stepRows(Running& r, ReadRows& rows, size_t vocab, Progress& p) {
  Slot& slot = slots[r.slot];
  const int64_t fedFrom = slot.state->length() - static_cast<int64_t>(r.toFeed.size() + r.drafts.size());
  Finish finish = Finish::Running;
  size_t kept = 0;
  for (size_t i = 0; i <= r.drafts.size(); ++i) {
    const std::optional<TokenId> draft = i < r.drafts.size() ? std::optional(r.drafts[i]) : std::nullopt;
    const size_t count = rows.heads.empty() ? rows.values.size() / vocab : rows.heads.size();
    const size_t at = r.drafts.empty() ? count - 1 : i;
    finish = rows.heads.empty() ? step(r, rows.values.subspan(at * vocab, vocab), nullptr, p, draft)
                                : step(r, {}, &rows.heads[at], p, draft);
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

void Engine::Impl::fork(Running& leader, const std::vector<int>& followers, const std::vector<float>& row, std::vector<Progress>& out) {
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
    const Finish finish = p.finish = step(f, values, nullptr, p, std::nullopt);
    out.push_back(std::move(p));
    if (finish != Finish::Running) {
      release(f);
      running.erase(it);
    }
  }
}

namespace {
// What the draw of a whole row reads: the row with the request's penalties and logit bias (unless
// the GPU holding it applied them).
void penalize(std::span<float> row, const Request& request, const std::vector<TokenId>& generated, bool penalized) {
  if (penalized) return;
  applyPenalties(row, request.sampling, request.prompt, generated);
  applyLogitBias(row, request.sampling);
}
}  // namespace

void Engine::Impl::drawSideBySide(const Plan& plan, std::vector<ReadRows>& rows, size_t vocab) {
  for (auto& entry : running) entry.second.drawn.reset();  // none left by a step that threw
  std::vector<size_t> drawing;
  for (size_t i = 0; i < plan.ids.size(); ++i) {
    const Running& r = running.at(plan.ids[i]);
    if (plan.feeds[i].logits && r.drafts.empty() && (!r.grammar || r.masked) && r.followers.empty() &&
        rows[i].heads.empty())
      drawing.push_back(i);
  }
  if (drawing.size() < 2) return;
  // A served batch's draws ran one after another here while the other threads waited: 8 of
  // SmolLM2's 49,152 logits were 8 % of a step.
  core::parallelTasks(static_cast<int64_t>(drawing.size()), [&](int64_t k) {
    const size_t i = drawing[static_cast<size_t>(k)];
    Running& r = running.at(plan.ids[i]);
    const std::span<float> row = rows[i].values.last(vocab);
    penalize(row, r.request, r.generated, r.penalized);
    r.drawn = chooseToken(row, r.request.sampling, r.generated.size());
  });
}

Finish Engine::Impl::step(Running& r, std::span<float> row, const RowHead* head, Progress& p,
                          std::optional<TokenId> draft) {
  Slot& slot = slots[r.slot];
  slot.held.insert(slot.held.end(), r.toFeed.begin(), r.toFeed.end());
  const Sampling& s = r.request.sampling;
  const uint64_t index = r.generated.size();
  TokenId token = 0;
  if (head) {  // headTokens: no logprobs, and any penalties, bias and grammar's mask in the row already
    token = draft ? verifyDraft(*head, s, index, *draft) : chooseToken(*head, s, index);
  } else if (r.drawn) {  // by drawSideBySide, from this row
    token = *std::exchange(r.drawn, std::nullopt);
  } else {
    penalize(row, r.request, r.generated, r.penalized);
    if (r.grammar && !r.masked) r.grammar->constrain(row, *grammarTokens, s.temperature == 0.0 && s.logprobs < 0);
    token = draft ? verifyDraft(row, s, index, *draft) : chooseToken(row, s, index);
  }
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

Finish Engine::Impl::ended(Running& r, Progress& p, Finish finish) {
  if (r.text) p.text += r.text->finish();
  return finish;
}

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
    const std::optional<KvFormat> fixed = model->kvFormat();
    const KvFormat format = fixed ? *fixed : chooseKvFormat(pages, model->poolMemory(), [&](const KvFormat& f) {
      return model->newPool(1, f)->bytes();
    });
    impl_->pool = model->newPool(pages, format);
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

double Engine::warm() {
  const auto start = std::chrono::steady_clock::now();
  // The kernel tunings an earlier start measured, kept next to the kernel cache. Like the
  // kernel cache, a damaged file counts as none (it is replaced below) and a failed save as
  // nothing kept: neither stops the engine.
  const std::string tunings = gizhw::gpu::tuningsDirectory();
  try {
    gizhw::gpu::loadTunings(tunings);
  } catch (const Error&) {
  }
  LanguageModel& model = *impl_->model;
  if (model.hasLogits()) {
    // A short prompt: the kernels do not depend on its length, and it fits every context.
    const int64_t prompt = std::min<int64_t>(16, impl_->maxTokens - 1);
    std::vector<std::unique_ptr<SequenceState>> states;
    // A model that records its decode steps records each batch size on its second run: those
    // run twice, for every size up to the slots.
    const auto slots = static_cast<int64_t>(impl_->slots.size());
    const int64_t steps = model.recordsSteps() ? 2 * slots : 1;
    // Room for the prompt, the steps and a draft.
    const int64_t room = std::min<int64_t>(prompt + steps + 2, impl_->maxTokens);
    // In the engine's pool, where its steps' keys and values are (a recording reads them there).
    for (int64_t s = 0; s < slots; ++s)
      states.push_back(impl_->pool ? model.newStateIn(impl_->pool, room) : model.newState(room));
    if (prompt > 0) model.forward({{states[0].get(), std::vector<TokenId>(static_cast<size_t>(prompt), 0)}});
    for (int64_t size = model.recordsSteps() ? 1 : slots; size <= slots; ++size)
      for (int run = 0; run < (model.recordsSteps() ? 2 : 1); ++run) {
        std::vector<Feed> step;
        for (auto state = states.begin(); state != states.begin() + size; ++state)
          if ((*state)->length() + 1 <= (*state)->capacity()) step.push_back({state->get(), {0}});
        if (!step.empty()) model.forward(step);
      }
    if (model.drafts() && impl_->drafts > 0 && states[0]->length() < states[0]->capacity())
      model.draft(*states[0], 0, 1, {});
  }
  // Whatever this process measured (in these steps or before) is kept for the next start.
  if (gizhw::gpu::tuningsMeasured() > 0) {
    try {
      gizhw::gpu::saveTunings(tunings);
    } catch (const Error&) {
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Engine::running() const { return static_cast<int>(impl_->running.size()); }
int Engine::slots() const { return static_cast<int>(impl_->slots.size()); }
int64_t Engine::maxTokens() const { return impl_->maxTokens; }

int64_t Engine::poolTokens() const { return impl_->pool ? impl_->pool->pages() * impl_->pool->pageTokens() : 0; }
int64_t Engine::poolBytes() const { return impl_->pool ? impl_->pool->bytes() : 0; }
KvFormat Engine::kvFormat() const {
  return impl_->pool ? impl_->pool->format() : impl_->model->kvFormat().value_or(KvFormat(DType::F32));
}

int64_t Engine::preemptions() const { return impl_->preemptions; }

int64_t Engine::poolPagesUsed() const { return impl_->pool ? impl_->pool->pages() - impl_->pool->freePages() : 0; }

void Engine::setHostCache(int64_t bytes) {
  check(bytes >= -1, "engine: host cache of " + std::to_string(bytes) + " bytes is not a size (-1: automatic)");
  Impl& m = *impl_;
  m.parkLimit = bytes;
  if (bytes >= 0) m.trimHostCache(bytes);
}

int64_t Engine::hostCacheBytes() const { return impl_->parkedBytes; }

int Engine::freeSlots() const {
  return static_cast<int>(std::count_if(impl_->slots.begin(), impl_->slots.end(), [](const Impl::Slot& s) { return !s.busy; }));
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
  Running r;
  r.request = request;
  r.slot = m.seat(r.sequence());
  const int id = m.nextId++;
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
  if (m.pool) m.resumeWaiting();
  Impl::Plan plan;
  std::vector<tensor::Tensor> logits;
  try {
    plan = m.plan();  // drafts write into the states: a failure there resets like the forward's
    if (m.pool) m.roomFor(plan);
    const auto start = std::chrono::steady_clock::now();
    logits = m.model->forward(plan.feeds);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    check(logits.size() == plan.feeds.size(), "engine: the model gave " + std::to_string(logits.size()) +
                                                  " logit rows for " + std::to_string(plan.feeds.size()) + " sequences");
    m.budget.measured(plan.decodeRows, plan.promptRows, seconds);
    // A row on a GPU that one token is drawn from takes its penalties and its grammar's mask
    // there, in that order, so that only its head need cross (with drafts each row's penalties
    // and masks differ, and choices copy the row: those rows cross whole and the host applies
    // them); the step's penalties in one launch. Like the forward's, a failure resets.
    StepPenalties penalties;
    for (size_t i = 0; i < plan.ids.size(); ++i) {
      Impl::Running& r = m.running.at(plan.ids[i]);
      const tensor::Tensor& l = logits[i];
      const bool onDevice = plan.feeds[i].logits && l.onGpu() && l.dtype() == DType::F32 && l.isContiguous() &&
                            l.numel() > 0 && r.drafts.empty() && r.followers.empty();
      r.penalized = onDevice && penalizes(r.request.sampling);
      if (r.penalized) penalties.add(l, r.request.sampling, r.request.prompt, r.generated, r.penalties);
      r.masked = onDevice && r.grammar;
    }
    penalties.apply();
    StepMasks masks;
    for (size_t i = 0; i < plan.ids.size(); ++i) {
      Impl::Running& r = m.running.at(plan.ids[i]);
      if (r.masked && r.grammar->active())
        masks.add(logits[i], r.grammar->allowed(*m.grammarTokens, static_cast<size_t>(logits[i].size(-1))));
    }
    masks.apply();
  } catch (...) {
    m.resetAll();
    throw;
  }
  m.settleHeads();
  std::vector<bool> want(plan.ids.size());
  std::vector<size_t> heads(plan.ids.size());
  for (size_t i = 0; i < plan.ids.size(); ++i) {
    const Impl::Running& r = m.running.at(plan.ids[i]);
    want[i] = plan.feeds[i].logits;
    heads[i] = headTokens(r.request.sampling, !r.followers.empty(), r.penalized, r.masked);
  }
  std::vector<ReadRows> read = readRows(logits, want, heads);
  if (!logits.empty()) m.drawSideBySide(plan, read, static_cast<size_t>(logits[0].size(-1)));
  std::vector<Progress> out;
  for (size_t i = 0; i < plan.ids.size(); ++i) {
    const auto it = m.running.find(plan.ids[i]);
    Impl::Running& r = it->second;
    if (!plan.feeds[i].logits) {  // a part of its prompt: no token yet
      m.readPart(r, plan.feeds[i].tokens.size());
      continue;
    }
    Progress p;
    p.request = plan.ids[i];
    p.cached = r.cached;
    const std::vector<float> shared =
        r.followers.empty() ? std::vector<float>() : std::vector<float>(read[i].values.begin(), read[i].values.end());
    const Finish finish = p.finish = m.stepRows(r, read[i], static_cast<size_t>(logits[i].size(-1)), p);
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
  return hidden(prompt, {impl_->model->config().numLayers});
}

tensor::Tensor Engine::hidden(const std::vector<TokenId>& prompt, const std::vector<int64_t>& layers,
                              int64_t attended) const {
  check(!prompt.empty(), "hidden: the prompt is empty");
  check(static_cast<int64_t>(prompt.size()) <= impl_->maxTokens,
        "hidden: the prompt's " + std::to_string(prompt.size()) + " tokens exceed the engine's " +
            std::to_string(impl_->maxTokens) + "-token context");
  return impl_->model->hidden(prompt, layers, attended);
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
