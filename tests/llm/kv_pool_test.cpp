// The KV pool (llm/ops/kv_pool.h) and the engine over it: states take pages as they grow and give
// them back as they shrink; a copy shares its pages until one of the two writes there (then that
// one writes into a copy of its own), and reads the logits it would read alone; the engine starts
// a request from the slot holding the longest start of its prompt without cutting that slot's
// tail away, a pool smaller than every slot's context takes pages from idle slots, and chats
// that lose their slot move to host memory and come back.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "llm/language_model.h"
#include "llm/llm_test_util.h"
#include "llm/model_reference.h"
#include "llm/pool_fixture.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

constexpr int64_t kPage = 256;

// The logits of the last of `prompt`, read alone in a state of its own.
std::vector<float> aloneLogits(const std::vector<TokenId>& prompt) {
  const std::unique_ptr<SequenceState> state = llama()->newState(1024);
  return llama()->forward({{state.get(), prompt}})[0].toFloats();
}

int64_t used(const StatePool& pool) { return pool.pages() - pool.freePages(); }

TEST(KvPool, CopiesSharePagesUntilTheyWrite) {
  LanguageModel& model = *llama();
  ASSERT_EQ(model.pageTokens(), kPage);
  const std::shared_ptr<StatePool> pool = model.newPool(8, DType::F32);
  const std::vector<TokenId> prompt = tokens(300, 1);
  std::unique_ptr<SequenceState> a = model.newStateIn(pool, 1024), b = model.newStateIn(pool, 1024);
  model.forward({{a.get(), prompt}});
  EXPECT_EQ(used(*pool), 2);  // positions 0..255 and 256..299
  ASSERT_TRUE(b->copyFrom(*a));
  EXPECT_EQ(used(*pool), 2);  // shared, not copied
  // What a write takes: a copy of the shared page written into, and the pages past the table.
  EXPECT_EQ(b->pagesToAppend(1), 1);
  EXPECT_EQ(b->pagesToAppend(300), 2);
  // b writes into the page it shares: its own copy of it; a then writes alone into the original.
  const std::vector<float> bNext = model.forward({{b.get(), {7}}})[0].toFloats();
  EXPECT_EQ(used(*pool), 3);
  EXPECT_EQ(a->pagesToAppend(1), 0);  // b has its own copy now: a writes alone into the original
  const std::vector<float> aNext = model.forward({{a.get(), {9}}})[0].toFloats();
  EXPECT_EQ(used(*pool), 3);
  EXPECT_EQ(bNext, aloneLogits(prompt + std::vector<TokenId>{7}));
  EXPECT_EQ(aNext, aloneLogits(prompt + std::vector<TokenId>{9}));
  // Pages past a truncation go back; a page still shared stays.
  a->truncate(100);
  EXPECT_EQ(used(*pool), 2);
  b.reset();
  EXPECT_EQ(used(*pool), 1);
  a.reset();
  EXPECT_EQ(used(*pool), 0);
}

TEST(KvPool, AFullPoolIsAnErrorNamingIt) {
  LanguageModel& model = *llama();
  const std::shared_ptr<StatePool> pool = model.newPool(1, DType::F32);
  const std::unique_ptr<SequenceState> state = model.newStateIn(pool, 1024);
  expectError([&] { model.forward({{state.get(), tokens(300, 2)}}); }, {"KV pool: all 1 pages (256 tokens) are in use"});
  // A state of another model's pool is refused.
  const std::shared_ptr<LanguageModel> other = buildLanguageModel(converted("llama", 8));
  expectError([&] { other->newStateIn(pool, 64); }, {"the pool was not made by this model"});
}

TEST(KvPool, TheEngineSizesItsPoolAndRefusesOneTooSmall) {
  Engine engine(llama(), nullptr, {}, 3, 600);
  EXPECT_EQ(engine.poolTokens(), 3 * 3 * kPage);  // every slot's whole context, in whole pages
  EXPECT_GT(engine.poolBytes(), 0);
  EXPECT_EQ(Engine(llama(), nullptr, {}, 3, 600, 1000).poolTokens(), 4 * kPage);
  expectError([&] { Engine(llama(), nullptr, {}, 3, 600, 500); },
              {"engine: a KV pool of 500 tokens (2 pages of 256) cannot hold one slot's context of 600 tokens"});
  expectError([&] { Engine(llama(), nullptr, {}, 3, 600, -1); }, {"engine: a KV pool of -1 tokens is not a size"});
}

// Runs request r to its end in `engine`; returns its tokens and the prompt tokens it did not read.
std::pair<std::vector<TokenId>, int64_t> run(Engine& engine, const Request& r) {
  const int id = engine.add(r);
  std::vector<TokenId> out;
  int64_t cached = -1;
  while (engine.running() > 0)
    for (const Progress& p : engine.advance())
      if (p.request == id) {
        out.insert(out.end(), p.tokens.begin(), p.tokens.end());
        if (cached < 0) cached = p.cached;
      }
  return {out, cached};
}

TEST(KvPool, ARequestSharesTheLongestStartWithoutCuttingItsSlotsTail) {
  Engine engine(llama(), nullptr, {}, 3, 1024);
  const std::vector<TokenId> head = tokens(300, 3), first = head + tokens(20, 4), second = head + tokens(30, 5);
  const auto [firstOut, firstCached] = run(engine, request(first, 4));
  EXPECT_EQ(firstCached, 0);
  EXPECT_EQ(engine.poolPagesUsed(), 2);
  // Another tail after the same head: the head's pages are shared (its first page whole, the
  // second copied as the request writes there); the first request's slot keeps its tail.
  const auto [secondOut, secondCached] = run(engine, request(second, 4));
  EXPECT_EQ(secondCached, 300);
  EXPECT_EQ(engine.poolPagesUsed(), 3);
  // The first chat's next turn finds all it read.
  const std::vector<TokenId> next = first + firstOut + tokens(10, 6);
  const auto [nextOut, nextCached] = run(engine, request(next, 4));
  EXPECT_EQ(nextCached, static_cast<int64_t>(first.size() + firstOut.size()) - 1);
  // Each gives what it gives alone, in an engine of its own.
  for (const auto& [prompt, out] : {std::pair{first, firstOut}, {second, secondOut}, {next, nextOut}}) {
    Engine alone(llama(), nullptr, {}, 1, 1024);
    EXPECT_EQ(run(alone, request(prompt, 4)).first, out);
  }
}

TEST(KvPool, IdleSlotsGiveTheirPagesToTheRunningOnes) {
  // Two slots of 512 tokens in a pool of 2 pages: the second request takes the idle first slot's
  // pages; the first chat moves to host memory and comes back for its next request (or, without
  // a host cache, is read again).
  for (const bool keep : {true, false}) {
    Engine engine(llama(), nullptr, {}, 2, 512, 512);
    if (!keep) engine.setHostCache(0);
    const std::vector<TokenId> a = tokens(300, 7), b = tokens(290, 8);
    const auto [aOut, aCached] = run(engine, request(a, 3));
    const auto [bOut, bCached] = run(engine, request(b, 3));
    EXPECT_EQ(engine.poolPagesUsed(), 2);
    EXPECT_EQ(engine.hostCacheBytes() > 0, keep);
    const auto [again, againCached] = run(engine, request(a, 3));
    EXPECT_EQ(againCached, keep ? 299 : 0);
    EXPECT_EQ(again, aOut);
    Engine alone(llama(), nullptr, {}, 1, 512);
    EXPECT_EQ(run(alone, request(b, 3)).first, bOut);
  }
}

TEST(KvPool, EightRequestsReadTheirSharedHeadOnceAndKeepOneCopy) {
  // A head of 2,000 tokens (7 whole pages and 208 positions of an eighth), 8 tails of 30.
  const size_t headTokens = 2000;
  const std::vector<TokenId> head = tokens(headTokens, 9);
  std::vector<Request> requests;
  for (unsigned i = 0; i < 8; ++i) {
    Request r = request(head + tokens(30, 10 + i), 4);
    r.head = headTokens;
    r.sampling.logprobs = 3;
    requests.push_back(r);
  }
  Engine engine(llama(), nullptr, {}, 8, 4096);
  std::map<int, Result> results;
  std::map<int, int64_t> cached;
  for (const Request& r : requests) results[engine.add(r)];
  while (engine.running() > 0)
    for (const Progress& p : engine.advance()) {
      Result& out = results[p.request];
      out.tokens.insert(out.tokens.end(), p.tokens.begin(), p.tokens.end());
      out.logprobs.insert(out.logprobs.end(), p.logprobs.begin(), p.logprobs.end());
      if (!cached.count(p.request)) cached[p.request] = p.cached;
    }
  // The head read once: the first request read it all, the others only their tails.
  int readWhole = 0;
  for (const auto& [id, n] : cached) {
    if (n == 0) ++readWhole;
    else EXPECT_EQ(n, static_cast<int64_t>(headTokens));
  }
  EXPECT_EQ(readWhole, 1);
  // The head's 8 pages, kept once, and each request's own copy of the page the head ends in
  // (its tail and answer end at position 2033, within that page).
  EXPECT_EQ(engine.poolPagesUsed(), 8 + 8);
  // Each gives the tokens and log probabilities (its logits) that it gives alone.
  for (size_t i = 0; i < requests.size(); ++i) {
    Engine alone(llama(), nullptr, {}, 1, 4096);
    const Result want = alone.generate({requests[i]})[0];
    const Result& got = results[static_cast<int>(i)];
    ASSERT_EQ(got.tokens, want.tokens) << "request " << i;
    ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
    for (size_t t = 0; t < want.logprobs.size(); ++t) {
      EXPECT_EQ(got.logprobs[t].logprob, want.logprobs[t].logprob) << "request " << i << ", token " << t;
      EXPECT_EQ(got.logprobs[t].top, want.logprobs[t].top) << "request " << i << ", token " << t;
    }
  }
  // A later prompt that starts with the head reads only its rest, with no head named.
  const Request later = request(head + tokens(5, 30), 1);
  const int id = engine.add(later);
  EXPECT_EQ(engine.advance()[0].cached, static_cast<int64_t>(headTokens));
  (void)id;
  // A head past the prompt is an Error naming both; the engine goes on.
  Request bad = request(tokens(10, 31), 1);
  bad.head = 11;
  expectError([&] { engine.add(bad); }, {"request: head 11 is past the prompt's 10 tokens"});
  EXPECT_EQ(engine.generate({request(tokens(10, 31), 1)}).size(), 1u);
}

// Runs request r alone in `engine`: its tokens and log probabilities, and the prompt tokens it
// did not read.
std::pair<Result, int64_t> runLogged(Engine& engine, const Request& r) {
  const int id = engine.add(r);
  Result got;
  int64_t cached = -1;
  while (engine.running() > 0)
    for (const Progress& p : engine.advance()) {
      if (p.request != id) continue;
      if (cached < 0) cached = p.cached;
      got.tokens.insert(got.tokens.end(), p.tokens.begin(), p.tokens.end());
      got.logprobs.insert(got.logprobs.end(), p.logprobs.begin(), p.logprobs.end());
    }
  return {got, cached};
}

// Three chats on one slot, their turns interleaved: each turn takes the slot from another chat,
// whose state moves to host memory, and takes its own chat's back. Each turn gives the bits it
// gives when its chat keeps a slot of its own (an engine of three slots), and a fresh prefill's
// logits: the same bits where the model reads a prompt in any split alike, to `tolerance` where
// it does not (Qwen 3.5's DeltaNet reads a prompt in chunks, a token at a time when decoding).
void threeChatsOnOneSlot(const std::shared_ptr<LanguageModel>& model, bool keep, float tolerance) {
  Engine engine(model, nullptr, {}, 1, 512), stay(model, nullptr, {}, 3, 512);
  if (!keep) engine.setHostCache(0);
  const auto vocab = static_cast<TokenId>(model->config().vocabSize);
  std::vector<std::vector<TokenId>> chats(3);
  for (int turn = 0; turn < 3; ++turn)
    for (unsigned c = 0; c < 3; ++c) {
      std::vector<TokenId> said = tokens(40, 100 + 10 * c + turn);
      for (TokenId& t : said) t %= vocab;
      const std::vector<TokenId> prompt = chats[c] + said;
      Request r = request(prompt, 3);
      r.sampling.logprobs = 2;
      const auto [got, cached] = runLogged(engine, r);
      const std::string where = "chat " + std::to_string(c) + ", turn " + std::to_string(turn);
      // It read only what its chat had not: the last turn's prompt and answer (the answer's last
      // token was drawn, not read).
      const int64_t held = chats[c].empty() ? 0 : static_cast<int64_t>(chats[c].size()) - 1;
      EXPECT_EQ(cached, keep ? held : 0) << where;
      const auto [kept, keptCached] = runLogged(stay, r);
      EXPECT_EQ(keptCached, held) << where;
      ASSERT_EQ(got.tokens, kept.tokens) << where;
      for (size_t t = 0; t < kept.logprobs.size(); ++t)
        EXPECT_EQ(got.logprobs[t].logprob, kept.logprobs[t].logprob) << where;
      Engine fresh(model, nullptr, {}, 1, 512);
      const Result once = fresh.generate({r})[0];
      EXPECT_NEAR(got.logprobs[0].logprob, once.logprobs[0].logprob, tolerance) << where;
      if (tolerance == 0) {
        EXPECT_EQ(got.tokens, once.tokens) << where;
      }
      chats[c] = prompt + got.tokens;
    }
  if (keep) EXPECT_GT(engine.hostCacheBytes(), 0);
  else EXPECT_EQ(engine.hostCacheBytes(), 0);
}

TEST(HostCache, ThreeChatsOnOneSlotEachReadOnlyTheirNewTokens) {
  threeChatsOnOneSlot(llama(), true, 0);
  threeChatsOnOneSlot(llama(), false, 0);
  // Keys and values in the engine's automatic format (8 bits here): host memory keeps them so.
  threeChatsOnOneSlot(buildLanguageModel(converted("llama", 8), {.kvCache = std::nullopt}), true, 0);
}

// Qwen 3.5: the DeltaNet states (and those kept at marks) move with the keys and values. In f32
// (its chunked and one-by-one rules agree to 1e-5 of the logits' range: qwen35_test.cpp; with
// int8 activations this random model moves far more, see there).
TEST(HostCache, Qwen35ChatsTakeTheirRecurrentStatesBack) {
  const std::shared_ptr<LanguageModel> qwen = buildLanguageModel(converted("qwen3_5", kUnquantized));
  threeChatsOnOneSlot(qwen, true, 1e-3f);
}

TEST(HostCache, ACopiedQwen35StateContinuesBitForBit) {
  const std::shared_ptr<LanguageModel> qwen = buildLanguageModel(converted("qwen3_5", 8));
  const std::vector<TokenId> prompt = readReference("qwen3_5").prompts.back();
  const std::unique_ptr<SequenceState> original = qwen->newState(256), copy = qwen->newState(256);
  qwen->forward({{original.get(), prompt, false, {100}}});  // a mark after 100 tokens
  ASSERT_TRUE(copy->copyFrom(*original));
  EXPECT_EQ(copy->length(), original->length());
  EXPECT_EQ(qwen->forward({{copy.get(), {7}}})[0].toFloats(), qwen->forward({{original.get(), {7}}})[0].toFloats());
  // The marks came too: both go back to 100 and read on alike.
  EXPECT_EQ(copy->reusable(120), 100);
  copy->truncate(100);
  original->truncate(100);
  EXPECT_EQ(qwen->forward({{copy.get(), {5}}})[0].toFloats(), qwen->forward({{original.get(), {5}}})[0].toFloats());
}

}  // namespace

// A chat moved to host memory takes the pages it holds, not its engine's whole context: each
// parked chat made a pool of every page of the context (and zeroed it), 16 pages for 1 here. The
// first chat waits in the pool until the second, of the whole context, needs its page.
TEST(HostCache, AParkedChatTakesThePagesItHolds) {
  const Request whole = request(tokens(16 * kPage - 3, 2), 2);
  Engine(llama(), nullptr, {}, 1, 16 * kPage).generate({whole});  // what the model keeps for such a prompt, made before
  Engine engine(llama(), nullptr, {}, 1, 16 * kPage);
  engine.generate({request(tokens(40, 1), 3)});
  const uint64_t before = tensor::Storage::liveBytes();
  engine.generate({whole});
  const int64_t parked = engine.hostCacheBytes();
  ASSERT_GT(parked, 0);
  const int64_t onePage = llama()->newPool(1, KvFormat(DType::F32), true)->bytes();
  EXPECT_EQ(parked, onePage);
  EXPECT_LE(static_cast<int64_t>(tensor::Storage::liveBytes() - before), 2 * onePage);
}

// A chat whose slot another request takes stays in the pool, sharing its pages (nothing copied,
// no host memory), and comes back from there; once the pool needs its pages, it moves to host
// memory and comes back from there. Each turn gives the tokens it gives in an engine of its own.
TEST(HostCache, AChatWaitsInThePoolUntilThePoolNeedsItsPages) {
  Engine engine(llama(), nullptr, {}, 1, 4 * kPage);
  const auto alone = [](const std::vector<TokenId>& prompt, int n) {
    Engine own(llama(), nullptr, {}, 1, 4 * kPage);
    return run(own, request(prompt, n)).first;
  };
  const std::vector<TokenId> a = tokens(40, 11), b = tokens(50, 12);
  const auto [aOut, aCached] = run(engine, request(a, 3));
  const auto [bOut, bCached] = run(engine, request(b, 3));
  EXPECT_EQ(engine.hostCacheBytes(), 0);
  EXPECT_EQ(engine.poolPagesUsed(), 2);  // a's page, kept for it, and b's
  // a's next turn takes its pages back from the pool (b waits there now): it reads only its new tokens.
  const std::vector<TokenId> aNext = a + aOut + tokens(10, 13);
  const auto [aNextOut, aNextCached] = run(engine, request(aNext, 3));
  EXPECT_EQ(aNextCached, static_cast<int64_t>(a.size() + aOut.size()) - 1);
  EXPECT_EQ(aNextOut, alone(aNext, 3));
  EXPECT_EQ(engine.hostCacheBytes(), 0);
  EXPECT_EQ(engine.poolPagesUsed(), 2);
  // A prompt of the whole context needs every page: the waiting chats move to host memory.
  const std::vector<TokenId> c = tokens(4 * kPage - 3, 14);
  EXPECT_EQ(run(engine, request(c, 2)).first, alone(c, 2));
  const int64_t onePage = llama()->newPool(1, KvFormat(DType::F32), true)->bytes();
  EXPECT_EQ(engine.hostCacheBytes(), 2 * onePage);  // a's and b's
  // b's next turn comes back from host memory, c (in the pool now) moving there to give it a page.
  const std::vector<TokenId> bNext = b + bOut + tokens(10, 15);
  const auto [bNextOut, bNextCached] = run(engine, request(bNext, 3));
  EXPECT_EQ(bNextCached, static_cast<int64_t>(b.size() + bOut.size()) - 1);
  EXPECT_EQ(bNextOut, alone(bNext, 3));
  EXPECT_EQ(engine.hostCacheBytes(), 5 * onePage);  // a's page and c's 4
}

// At most a chat a slot waits in the pool (a model's states may keep memory beside their pages):
// a third chat on one slot sends the first to host memory though the pool has room, and the
// first's next turn comes back from there.
TEST(HostCache, AtMostAChatASlotWaitsInThePool) {
  Engine engine(llama(), nullptr, {}, 1, 4 * kPage);
  const std::vector<TokenId> a = tokens(40, 21), b = tokens(40, 22), c = tokens(40, 23);
  const auto [aOut, aCached] = run(engine, request(a, 3));
  run(engine, request(b, 3));
  EXPECT_EQ(engine.hostCacheBytes(), 0);
  run(engine, request(c, 3));
  const int64_t onePage = llama()->newPool(1, KvFormat(DType::F32), true)->bytes();
  EXPECT_EQ(engine.hostCacheBytes(), onePage);  // a's
  EXPECT_EQ(engine.poolPagesUsed(), 2);         // b's, waiting, and c's
  const std::vector<TokenId> aNext = a + aOut + tokens(10, 24);
  EXPECT_EQ(run(engine, request(aNext, 3)).second, static_cast<int64_t>(a.size() + aOut.size()) - 1);
}

// Random chats over few slots and a small pool, one or two requests at a time, a host cache of
// two pages: every turn, wherever its chat waited (a slot, the pool, host memory, nowhere), gives
// the tokens it gives in an engine of its own, and the pool and host cache stay within their sizes.
TEST(HostCache, RandomChatsGiveWhatTheyGiveAlone) {
  const int64_t context = 2 * kPage;
  const int64_t onePage = llama()->newPool(1, KvFormat(DType::F32), true)->bytes();
  Engine engine(llama(), nullptr, {}, 2, context, 3 * kPage);
  engine.setHostCache(2 * onePage);
  std::mt19937 rng(5);
  const auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::vector<TokenId>> chats(5);
  int resumed = 0;  // turns that read only the new part of their chat
  bool hostUsed = false;
  for (int turn = 0; turn < 40; ++turn) {
    std::vector<Request> requests;
    std::vector<size_t> of;
    const int together = uniform(1, 2);
    for (int k = 0; k < together; ++k) {
      size_t c = static_cast<size_t>(uniform(0, 4));
      if (k == 1 && c == of[0]) c = (c + 1) % chats.size();  // two turns of one chat are not at once
      if (chats[c].size() > 400 || uniform(0, 5) == 0) chats[c].clear();  // a new chat
      chats[c] = chats[c] + tokens(static_cast<size_t>(uniform(5, 60)), static_cast<unsigned>(1000 + 7 * turn + k));
      const Sampling s = k == 0 ? greedy() : sample(1.0, 0, 0.9, static_cast<uint64_t>(turn));
      requests.push_back(request(chats[c], 3, s));
      of.push_back(c);
    }
    std::map<int, std::vector<TokenId>> out;
    std::map<int, int64_t> cached;
    std::vector<int> ids;
    for (const Request& r : requests) ids.push_back(engine.add(r));
    while (engine.running() > 0)
      for (const Progress& p : engine.advance()) {
        out[p.request].insert(out[p.request].end(), p.tokens.begin(), p.tokens.end());
        if (!cached.count(p.request)) cached[p.request] = p.cached;
      }
    for (size_t k = 0; k < requests.size(); ++k) {
      Engine alone(llama(), nullptr, {}, 1, context);
      const std::vector<TokenId>& got = out[ids[k]];
      ASSERT_EQ(got, alone.generate({requests[k]})[0].tokens) << "turn " << turn << ", chat " << of[k];
      chats[of[k]] = chats[of[k]] + got;
      if (cached[ids[k]] > 0) ++resumed;
    }
    hostUsed = hostUsed || engine.hostCacheBytes() > 0;
    EXPECT_LE(engine.poolPagesUsed(), 3);
    EXPECT_LE(engine.hostCacheBytes(), 2 * onePage);
  }
  EXPECT_GT(resumed, 10);
  EXPECT_TRUE(hostUsed);
}
