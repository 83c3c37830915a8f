#pragma once
// The engine's state (Engine in include/gizml/llm.h): its slots and their states in the KV pool,
// the running requests, the heads kept and the chats moved to host memory. engine.cpp steps the
// requests; slot_memory.cpp decides where a request starts and what the pool and host memory keep.
#include <gizml/error.h>
#include <gizml/llm.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "llm/engine/device_rows.h"
#include "llm/engine/grammar_constraint.h"
#include "llm/engine/prefill_budget.h"
#include "llm/engine/stop_text.h"
#include "llm/language_model.h"

namespace gizml::llm {

/// What a slot's record of its tokens holds for a picture's row (Request::pictures).
inline constexpr TokenId kPictureRow = -1;

struct Engine::Impl {
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
    bool preempted = false;       // gave its slot's pages back when the pool ran short: waits, out of the steps
    bool resumed = false;         // started again after a preemption (cached stays its first start's)
    std::optional<TokenId> drawn;  // this step's token, drawn beside the batch's others (drawSideBySide)
    bool penalized = false;        // this step's row has its penalties and logit bias (StepPenalties)
    PenaltyTokens penalties;       // the tokens they touch, kept from step to step
    bool masked = false;           // and its grammar's mask, or the grammar leaves it free (StepMasks)

    // What its slot must hold before it draws its next token: the prompt (its pictures' rows as
    // kPictureRow, which no other request's rows equal) and the tokens drawn.
    std::vector<TokenId> sequence() const {
      std::vector<TokenId> tokens = request.prompt;
      for (const Picture& p : request.pictures)
        std::fill_n(tokens.begin() + p.first, p.rows.size(0), kPictureRow);
      tokens.insert(tokens.end(), generated.begin(), generated.end());
      return tokens;
    }
    // Whether steps feed it: it waits neither for another's prompt or head nor for pages.
    bool steps() const { return leader < 0 && headLeader < 0 && !preempted; }
    // Whether it feeds only the token it drew last (and drafts): its rows are not a prompt's.
    bool decodes() const { return steps() && !generated.empty() && toFeed.size() == 1; }
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
  static constexpr size_t kMinHead = 256;

  // A chat moved out of its slot when another request took the slot (or the pool ran short),
  // until a request that starts with its tokens takes it back: a state in the pool sharing the
  // slot's pages (inPool) until the pool needs them, else a copy in host memory of its own.
  struct Parked {
    std::vector<TokenId> held;
    std::unique_ptr<SequenceState> state;
    int64_t bytes = 0;  // of host memory (0 in the pool)
    bool inPool = false;
  };

  // Chats shorter than this are read again rather than moved out.
  static constexpr size_t kMinParked = 16;

  // The length of the longest start a and b share.
  static size_t commonPrefix(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
    return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
  }

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
  int64_t preemptions = 0;  // Engine::preemptions
  std::unique_ptr<GrammarTokens> grammarTokens;  // made for the first request with a grammar
  bool budgeted = true;  // prompts beside decoding requests are read in parts (setPrefillBudget)
  PrefillBudget budget;

  void validate(const Request& r) const;
  void validatePictures(const Request& r) const;

  // Where a request starts: a free slot, and the slot (busy or not) holding the longest start of
  // its prompt, whose state the free one copies (sharing its pages) when it is another. The free
  // slot is one whose tokens are all a start of the prompt (the longest: it loses nothing), else
  // the one used least recently, so that other chats keep what they hold.
  struct Place {
    size_t slot;
    std::optional<size_t> source;
  };
  std::optional<Place> place(const std::vector<TokenId>& prompt) const;

  // Takes a free slot for a request whose slot must hold `tokens` (its prompt; a resumed one's
  // tokens so far): the place's, holding its longest start found in a slot or in host memory.
  size_t seat(const std::vector<TokenId>& tokens);

  std::unique_ptr<SequenceState> newState() const;

  Slot& withState(Slot& slot);

  // The pages a pass over `feeds` takes: those past each state's table, and copies of the pages
  // it shares where it writes (two states sharing one page count its copy twice).
  int64_t pagesFor(const std::vector<Feed>& feeds) const;

  // Frees pool pages until `need` are free: chats parked in the pool move to host memory, then
  // idle slots (but `keep`) move out to host memory and give theirs back, least recently used
  // first, then kept heads leave. Whether enough are free.
  bool makeRoom(int64_t need, const Slot* keep = nullptr);

  // Moves chats parked in the pool to host memory, oldest first, until `need` pages are free.
  // Whether they are.
  bool freeParkedPages(int64_t need);
  // Moves the oldest chat parked in the pool to host memory (or drops it, past the host cache's
  // limit). Whether there was one.
  bool oldestParkedToHost();

  // Whether another slot, head or parked chat holds all that `held` holds.
  bool heldElsewhere(const Slot& slot) const;

  // Keeps what an idle slot holds before it is overwritten or gives up its pages: in the pool
  // (sharing its pages, nothing copied; seat keeps at most a chat a slot there, the oldest moving
  // to host memory) where `inPool` and the model's states copy, else in host memory within the
  // limit (setHostCache).
  void park(const Slot& slot, bool inPool);

  // A copy of `state` in host memory, as many pages as it holds, the oldest chats there leaving
  // first to keep within the limit.
  void parkInHost(const std::vector<TokenId>& held, const SequenceState& state);

  // Host-memory chats leave, oldest first, until they take at most `bytes`.
  void trimHostCache(int64_t bytes);

  // The parked chat holding the longest start of prompt comes back into `slot` where that is
  // more than the slot holds.
  void unpark(Slot& slot, const std::vector<TokenId>& prompt);

  // r reads what its slot does not hold of its sequence (the prompt, after a preemption the tokens
  // drawn too), and at least the last token (its logits).
  void readRest(Running& r);

  bool startsWith(const std::vector<TokenId>& prompt, const std::vector<TokenId>& head) const;

  // Request `id` (r) starts from the longest kept head its prompt starts with where that is more
  // than its slot holds; a head it names (Request::head) that is not kept it waits for while
  // another request reads it, or reads itself, to be kept after.
  void takeHead(Running& r, int id);

  // Drops the least recently used kept head (its pages go back where no slot shares them).
  bool dropHead();

  // After a pass: each head whose leader has read it is kept (a copy of the leader's state cut
  // at the head), and the requests waiting for it start from it.
  void settleHeads();

  // A cancelled request that was reading a head hands it to the first request waiting for it.
  void handOnHead(int cancelled);

  void release(Running& r) { slots[r.slot].busy = false; }
  int addOne(const Request& request);

  // After a failed forward pass the states may hold part of a step: start them afresh.
  void resetAll();

  /// The feed of a running request: the first `rows` of the tokens it has to read, and drafts
  /// after them when it decodes. A prompt's part carries the marks within it, the rest wait for
  /// theirs, and asks for no logits: no token follows it yet.
  Feed feedOf(Running& r, size_t rows);

  /// A step's feeds, in the requests' order.
  struct Plan {
    std::vector<int> ids;  // the requests fed: not the choices waiting for a prompt, nor prompts left for later steps
    std::vector<Feed> feeds;
    int64_t decodeRows = 0, promptRows = 0;
  };

  /// Every decoding request's feed and the prompts': whole, or beside decoding requests with the
  /// budget on, the parts its rows allow, first come first (vLLM's chunked prefill).
  Plan plan();

  // Makes room in the pool for a step's feeds: makeRoom, then the requests admitted last give
  // their pages back and leave the step (preempt) until the rest fit, as vLLM preempts by
  // recompute. A step keeps at least one request: alone it fits in the pool.
  void roomFor(Plan& plan);

  // Request `id` (r) moves what its slot holds to host memory (where park keeps it), gives the
  // slot's pages back and waits, keeping its slot, tokens, sampling and stop-text state.
  void preempt(int id, Running& r);

  // At the start of a step: the preempted requests, oldest first, start again (through seat, so
  // from a parked copy or another slot holding their tokens, reading only the rest) while the pool
  // has room for them (roomToResume).
  void resumeWaiting();

  // Whether the pool has room for the tokens of r (request `id`, preempted) and a page for each
  // request stepping, once idle slots, kept heads and the requests admitted after r (which would
  // not have started before it) gave theirs back.
  bool roomToResume(int id, const Running& r);

  // The request admitted last of those that steps feed (running.rend() where none is).
  std::map<int, Running>::reverse_iterator newestStepping();

  /// A part of r's prompt was read: its slot holds it, so the request goes on after it (and a
  /// request that starts the same way after a cancel reuses it).
  void readPart(Running& r, size_t rows);

  /// The tokens of one step from its logit rows: one, or with drafts each draft that the row
  /// before it confirms and then the row's own token; the state forgets the drafts not kept.
  Finish stepRows(Running& r, ReadRows& rows, size_t vocab, Progress& p);

  /// The choices waiting for leader's prompt continue from a copy of its state and draw their
  /// first tokens from copies of its logits row (taken before the leader's step changed it);
  /// where the state does not copy, a choice reads the prompt itself from the next step on.
  void fork(Running& leader, const std::vector<int>& followers, const std::vector<float>& row,
            std::vector<Progress>& out);

  /// The tokens of the step's requests that draw one token from a whole row of their own, with
  /// no grammar, drafts or followers (most of a served batch), drawn on the pool's threads side by
  /// side into Running::drawn, their rows changed by penalties and bias as step would: each draw
  /// reads only its request's row and settings, so the tokens are those of draws one after another.
  void drawSideBySide(const Plan& plan, std::vector<ReadRows>& rows, size_t vocab);

  /// One token from a row: read whole (row, which penalties, bias and a grammar change first), or
  /// only its head (where headTokens allowed it).
  Finish step(Running& r, std::span<float> row, const RowHead* head, Progress& p, std::optional<TokenId> draft);

  // A request ends with no stop string found: the text held back in case one began goes out.
  static Finish ended(Running& r, Progress& p, Finish finish);
};

}  // namespace gizml::llm
