// The block runner: each CUDA thread a fiber (ucontext), run until it finishes or parks at a
// barrier or a warp collective; a parked fiber runs again once its barrier releases. A block
// whose fibers all wait and none can be released (threads at different barriers, a warp
// collective naming a lane that exited) ends the launch with an error instead of hanging.
#include "gpu/emulator/runner.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "gpu/emulator/emulator.h"

namespace gizhw::gpu::emulator {
namespace {

constexpr size_t kStackBytes = 256 * 1024;  // a fiber's stack (a guard page below it)
constexpr size_t kPage = 4096;
constexpr int kSlotWords = 33 * 8;          // a warp exchange: 32 lanes x 8 words + the participants
constexpr int kGroupSlotWords = 128 * 4;    // a warpgroup exchange: 128 threads x 4 words

struct Copy {
  void* dst;
  const void* src;
  unsigned bytes;
};

enum class State { Ready, AtBarrier, AtWarp, AtGroup, AtMbarrier, Done };

// An mbarrier (PTX ISA "mbarrier"): the current phase, its pending arrivals and its transaction
// count (bytes expected by expect_tx less bytes completed, which may go below zero when a copy
// completes first), and the TMA copies in flight on it: their bytes land, and complete_tx, when
// a thread waits on the barrier.
struct Mbarrier {
  unsigned expected = 0, pending = 0, phase = 0;
  long long tx = 0;
  struct Landing {
    unsigned char* dst;
    std::vector<unsigned char> bytes;
  };
  std::vector<Landing> inFlight;
};

// Switching between fibers: on x86-64 a few instructions saving the callee-saved registers
// (swapcontext also saves the signal mask, a system call per switch: 50x slower, and a block of
// 256 threads with a shuffle loop switches millions of times); elsewhere ucontext.
#if defined(__x86_64__) && !defined(GZ_EMU_UCONTEXT)  // -DGZ_EMU_UCONTEXT tries the portable path
#define GZ_EMU_FAST_SWITCH 1
extern "C" void gz_emu_switch(void** save, void* next);
asm(R"(
.text
.globl gz_emu_switch
.hidden gz_emu_switch
.type gz_emu_switch,@function
gz_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size gz_emu_switch, .-gz_emu_switch
)");
#endif

struct Fiber {
#if defined(GZ_EMU_FAST_SWITCH)
  void* sp = nullptr;  // the saved stack pointer while parked
#else
  ucontext_t context;
#endif
  void* stack = nullptr;
  GzEmuThread thread{};
  State state = State::Ready;
  int line = 0;        // the __syncthreads it waits at
  unsigned mask = 0;   // the warp collective's mask it waits in
  unsigned mbarrier = 0, parity = 0;  // the mbarrier (shared offset) and phase parity it waits for
  std::vector<std::vector<Copy>> groups;  // committed cp.async groups, oldest first
  std::vector<Copy> open;                 // cp.async copies not yet committed
  std::vector<std::vector<GzEmuWgmma>> wgGroups;  // committed wgmma groups, oldest first
  std::vector<GzEmuWgmma> wgOpen;                 // wgmma operations not yet committed
};

struct Warp {
  unsigned existing = 0, live = 0, arrived = 0;
  unsigned generation = 0;
  const char* what = "";
  unsigned long long slots[2 * kSlotWords];
};

// A warpgroup (warps 4g..4g+3) in a warpgroup collective (wgmma.mma_async): its exchange rows,
// double-buffered like a warp's, and how many of its threads arrived.
struct Group {
  unsigned arrived = 0, generation = 0;
  unsigned long long slots[2 * kGroupSlotWords];
};

// The launch in progress (launches are serialized by kLaunchMutex).
struct Run {
  const Function* function = nullptr;
  const LaunchShape* shape = nullptr;
  void** params = nullptr;
  Module* module = nullptr;
  GzEmuCtx ctx{};
  std::vector<Warp> warps;
  std::vector<Group> groups;
  std::map<unsigned, Mbarrier> mbarriers;  // by shared offset; the block's, cleared before each
  unsigned threads = 0, live = 0, atBarrier = 0;
  std::vector<unsigned> order;  // the order fibers run in between barriers (GIZML_GPU_EMULATOR_SCHEDULE)
  Fiber* current = nullptr;
  unsigned position = 0;  // current's index in order
#if defined(GZ_EMU_FAST_SWITCH)
  void* scheduler = nullptr;
#else
  ucontext_t scheduler;
#endif
  std::string error;
};

std::mutex kLaunchMutex;
Run* g = nullptr;
// Fibers and their stacks, kept between launches (a stack is mapped once).
std::vector<std::unique_ptr<Fiber>> gFibers;

std::string where(const Fiber* f) {
  char buf[160];
  const GzEmuDim3& b = g->ctx.block;
  if (f)
    std::snprintf(buf, sizeof buf, " (block %u,%u,%u, thread %u,%u,%u)", b.x, b.y, b.z, f->thread.tid.x, f->thread.tid.y,
                  f->thread.tid.z);
  else
    std::snprintf(buf, sizeof buf, " (block %u,%u,%u)", b.x, b.y, b.z);
  return buf;
}

void setError(const std::string& what, const Fiber* f) {
  if (g->error.empty()) g->error = "kernel " + g->function->name + ": " + what + where(f);
}

// Switches from fiber `from` to `to`, or to the scheduler when `to` is null; returns when `from`
// is resumed.
void switchFiber(Fiber& from, Fiber* to) {
#if defined(GZ_EMU_FAST_SWITCH)
  gz_emu_switch(&from.sp, to ? to->sp : g->scheduler);
#else
  swapcontext(&from.context, to ? &to->context : &g->scheduler);
#endif
}

// The running fiber stops here and the next ready one in the run order goes on, straight from
// this fiber's stack: on from this fiber, then round from the first, the order of a scheduler's
// passes without a switch to the scheduler and back between every two fibers (a warp shuffle
// parks all 32 lanes: half the switches). Back to the scheduler (runBlock) when the launch
// failed, every thread ended or none can run. Returns when this fiber is resumed.
void park() {
  Run& r = *g;
  Fiber& from = *r.current;
  Fiber* to = nullptr;
  if (r.error.empty()) {
    for (unsigned step = 1; step <= r.threads && !to; ++step) {
      const unsigned k = (r.position + step) % r.threads;
      Fiber& f = *gFibers[r.order[k]];
      if (f.state != State::Ready) continue;
      to = &f;
      r.position = k;
    }
  }
  if (to == &from) return;  // released by its own arrival, and the only one that may run
  if (to) {
    r.current = to;
    r.ctx.thread = &to->thread;
  }
  switchFiber(from, to);
}

[[noreturn]] void failHere(const std::string& message) {
  setError(message, g->current);
  g->current->state = State::Done;  // never resumed: the launch ends
  park();
  std::abort();  // unreachable
}

// Releases the block barrier once every live thread waits at it (all at one __syncthreads).
void checkBarrier() {
  if (g->atBarrier == 0 || g->atBarrier != g->live) return;
  const Fiber* first = nullptr;
  for (unsigned i = 0; i < g->threads; ++i) {
    Fiber& f = *gFibers[i];
    if (f.state != State::AtBarrier) continue;
    if (!first) {
      first = &f;
    } else if (f.line != first->line) {
      setError("threads wait at different __syncthreads (line " + std::to_string(first->line) + " of thread " +
                   std::to_string(first->thread.linear) + ", line " + std::to_string(f.line) + " of thread " +
                   std::to_string(f.thread.linear) + "): a barrier in divergent code",
               nullptr);
      return;
    }
  }
  for (unsigned i = 0; i < g->threads; ++i)
    if (gFibers[i]->state == State::AtBarrier) gFibers[i]->state = State::Ready;
  g->atBarrier = 0;
}

// Releases a warp collective once every existing lane of its mask arrived; a lane of the mask
// that exited can never arrive: an error.
void checkWarp(unsigned w) {
  Warp& warp = g->warps[w];
  if (!warp.arrived) return;
  const unsigned firstLane = static_cast<unsigned>(__builtin_ctz(warp.arrived));
  const Fiber& first = *gFibers[w * 32 + firstLane];
  const unsigned need = first.mask & warp.existing;
  if (need & ~warp.live) {
    const unsigned lane = static_cast<unsigned>(__builtin_ctz(need & ~warp.live));
    setError(std::string(warp.what) + " with mask 0x" + [&] {
      char b[16];
      std::snprintf(b, sizeof b, "%08x", first.mask);
      return std::string(b);
    }() + " waits for lane " + std::to_string(lane) + " of warp " + std::to_string(w) + ", which has exited", &first);
    return;
  }
  if ((warp.arrived & need) != need) return;
  warp.slots[(warp.generation & 1) * kSlotWords + 256] = need;
  ++warp.generation;
  warp.arrived &= ~need;
  for (unsigned l = 0; l < 32; ++l)
    if ((need >> l) & 1) gFibers[w * 32 + l]->state = State::Ready;
}

// Releases warpgroup w's collective once its 128 threads arrived; one of them that exited can
// never arrive: an error.
void checkGroup(unsigned w) {
  Group& group = g->groups[w];
  if (!group.arrived) return;
  for (unsigned i = 128 * w; i < 128 * w + 128; ++i) {
    if (gFibers[i]->state != State::Done) continue;
    const Fiber* waiting = nullptr;
    for (unsigned k = 128 * w; k < 128 * w + 128 && !waiting; ++k)
      if (gFibers[k]->state == State::AtGroup) waiting = gFibers[k].get();
    setError("a warpgroup collective (wgmma) waits for thread " + std::to_string(i) + " of warpgroup " +
                 std::to_string(w) + ", which has exited: all 128 threads of the warpgroup must take part",
             waiting);
    return;
  }
  if (group.arrived != 128) return;
  ++group.generation;
  group.arrived = 0;
  for (unsigned i = 128 * w; i < 128 * w + 128; ++i) gFibers[i]->state = State::Ready;
}

// ---- the callbacks of GzEmuCtx -----------------------------------------------------------------

void cbBarrier(int line) {
  Fiber& f = *g->current;
  f.state = State::AtBarrier;
  f.line = line;
  ++g->atBarrier;
  checkBarrier();
  park();
}

unsigned long long* cbWarpSlots() {
  Warp& w = g->warps[g->current->thread.warp];
  return w.slots + (w.generation & 1) * kSlotWords;
}

void cbWarpSync(unsigned mask, const char* what) {
  Fiber& f = *g->current;
  const unsigned lane = f.thread.lane;
  if (!((mask >> lane) & 1)) failHere(std::string(what) + ": the calling lane is not in the mask");
  Warp& w = g->warps[f.thread.warp];
  if (w.arrived && gFibers[f.thread.warp * 32 + __builtin_ctz(w.arrived)]->mask != mask)
    failHere(std::string(what) + ": lanes of one warp wait in collectives with different masks");
  f.state = State::AtWarp;
  f.mask = mask;
  w.arrived |= 1u << lane;
  w.what = what;
  checkWarp(f.thread.warp);
  park();
}

unsigned long long* cbGroupSlots() {
  const unsigned w = g->current->thread.linear / 128;
  if (w >= g->groups.size()) return nullptr;  // an incomplete warpgroup: cbGroupSync fails it
  Group& group = g->groups[w];
  return group.slots + (group.generation & 1) * kGroupSlotWords;
}

// wgmma.mma_async is .sync.aligned over the warpgroup: the thread parks until the warpgroup's
// 128 threads (warps 4w..4w+3 of the block) arrived. A block whose threads end inside the
// warpgroup cannot run it.
void cbGroupSync(const char* what) {
  Fiber& f = *g->current;
  const unsigned w = f.thread.linear / 128;
  if (w >= g->groups.size())
    failHere(std::string(what) + ": the warpgroup of threads " + std::to_string(128 * w) + ".." +
             std::to_string(128 * w + 127) + " is incomplete (the block has " + std::to_string(g->threads) +
             " threads): all 128 threads of 4 whole warps must take part");
  f.state = State::AtGroup;
  ++g->groups[w].arrived;
  checkGroup(w);
  park();
}

unsigned cbActiveMask() { return g->warps[g->current->thread.warp].live; }

void cbFail(const char* message) { failHere(message); }

void cbCpAsync(void* dst, const void* src, unsigned bytes) { g->current->open.push_back({dst, src, bytes}); }
void cbCpCommit() {
  Fiber& f = *g->current;
  f.groups.push_back(std::move(f.open));
  f.open.clear();
}
void cbCpWait(int pending) {
  Fiber& f = *g->current;
  while (static_cast<int>(f.groups.size()) > pending) {
    for (const Copy& c : f.groups.front()) std::memcpy(c.dst, c.src, c.bytes);
    f.groups.erase(f.groups.begin());
  }
}

// wgmma operations: queued in the thread's open group, committed, and handed back to the kernel
// (which lands them in the accumulator registers) at the wgmma.wait_group that covers them.
void cbWgmmaIssue(const GzEmuWgmma* op) { g->current->wgOpen.push_back(*op); }
// The newest operation still in flight on the accumulator d: the next one on d adds to its result.
const GzEmuWgmma* cbWgmmaPending(const float* d) {
  Fiber& f = *g->current;
  for (auto it = f.wgOpen.rbegin(); it != f.wgOpen.rend(); ++it)
    if (it->d == d) return &*it;
  for (auto group = f.wgGroups.rbegin(); group != f.wgGroups.rend(); ++group)
    for (auto it = group->rbegin(); it != group->rend(); ++it)
      if (it->d == d) return &*it;
  return nullptr;
}
void cbWgmmaCommit() {
  Fiber& f = *g->current;
  f.wgGroups.push_back(std::move(f.wgOpen));
  f.wgOpen.clear();
}
void cbWgmmaWait(int pending, void (*land)(const GzEmuWgmma* op)) {
  Fiber& f = *g->current;
  while (static_cast<int>(f.wgGroups.size()) > pending) {
    for (const GzEmuWgmma& op : f.wgGroups.front()) land(&op);  // may fail the launch (and not return)
    f.wgGroups.erase(f.wgGroups.begin());
  }
}

// ---- mbarriers -----------------------------------------------------------------------------------

std::string hex(unsigned v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

unsigned char* cbSharedAddress(unsigned offset, unsigned bytes, const char* what);

// The initialized mbarrier at shared offset bar, or the launch fails naming the call.
Mbarrier& mbarrier(unsigned bar, const char* what) {
  auto it = g->mbarriers.find(bar);
  if (it == g->mbarriers.end())
    failHere(std::string(what) + ": no mbarrier was initialized at shared offset " + hex(bar) +
             " (mbarrier.init first, in this block)");
  return it->second;
}

// Ends the current phase when its arrivals and transactions are all done; threads waiting on the
// barrier look again.
void advance(unsigned bar, Mbarrier& b) {
  if (b.pending == 0 && b.tx == 0) {
    ++b.phase;
    b.pending = b.expected;
  }
  for (unsigned i = 0; i < g->threads; ++i) {
    Fiber& f = *gFibers[i];
    if (f.state == State::AtMbarrier && f.mbarrier == bar) f.state = State::Ready;
  }
}

void cbMbarInit(unsigned bar, unsigned count) {
  if (bar % 8) failHere("mbarrier.init: shared offset " + hex(bar) + " is not 8-byte aligned");
  cbSharedAddress(bar, 8, "mbarrier.init");
  if (count == 0 || count >= (1u << 20))
    failHere("mbarrier.init: an arrival count of " + std::to_string(count) + ", outside [1, 2^20 - 1]");
  auto it = g->mbarriers.find(bar);
  if (it != g->mbarriers.end() && !it->second.inFlight.empty())
    failHere("mbarrier.init: the mbarrier at " + hex(bar) + " still has TMA copies in flight");
  Mbarrier& b = g->mbarriers[bar];
  b = Mbarrier{};
  b.expected = b.pending = count;
}

// expect_tx (the transaction count rises by txBytes), then one arrival.
void cbMbarArrive(unsigned bar, unsigned txBytes, const char* what) {
  Mbarrier& b = mbarrier(bar, what);
  if (b.pending == 0) failHere(std::string(what) + ": the mbarrier at " + hex(bar) + " has no pending arrivals");
  b.tx += txBytes;
  --b.pending;
  advance(bar, b);
}

// A TMA copy's bytes, gathered by the kernel at its issue; they land at a wait on bar.
void cbMbarCopy(unsigned bar, unsigned char* dst, const unsigned char* bytes, unsigned n, const char* what) {
  Mbarrier& b = mbarrier(bar, what);
  b.inFlight.push_back({dst, std::vector<unsigned char>(bytes, bytes + n)});
  advance(bar, b);
}

// try_wait.parity until the phase of that parity completed (the current phase's parity differs):
// the copies in flight land first (each completing its bytes, possibly ending a phase); then,
// if the phase is still open, the thread parks until another thread arrives or issues a copy on
// the barrier. A phase that can never complete is found when no thread can run (runBlock).
void cbMbarWait(unsigned bar, unsigned parity, const char* what) {
  Fiber& f = *g->current;
  for (;;) {
    Mbarrier& b = mbarrier(bar, what);
    std::vector<Mbarrier::Landing> landing = std::move(b.inFlight);
    b.inFlight.clear();
    for (const Mbarrier::Landing& l : landing) {
      std::memcpy(l.dst, l.bytes.data(), l.bytes.size());
      b.tx -= static_cast<long long>(l.bytes.size());
      advance(bar, b);
    }
    if ((b.phase & 1) != parity) return;
    f.state = State::AtMbarrier;
    f.mbarrier = bar;
    f.parity = parity;
    park();
  }
}

unsigned char* cbSharedAddress(unsigned offset, unsigned bytes, const char* what) {
  const Module& m = *g->module;
  if (offset + static_cast<uint64_t>(bytes) <= *m.staticUsed) return m.staticShared + offset;
  if (offset >= kDynamicSharedOffset && offset - kDynamicSharedOffset + static_cast<uint64_t>(bytes) <= g->shape->sharedBytes)
    return m.dynamicShared + (offset - kDynamicSharedOffset);
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s: shared address 0x%x (%u bytes) is outside the block's shared memory", what, offset,
                bytes);
  failHere(buf);
}

unsigned cbSharedOffset(const void* p, const char* what) {
  const Module& m = *g->module;
  const auto* b = static_cast<const unsigned char*>(p);
  if (b >= m.staticShared && b < m.staticShared + *m.staticUsed) return static_cast<unsigned>(b - m.staticShared);
  if (b >= m.dynamicShared && b <= m.dynamicShared + g->shape->sharedBytes)
    return kDynamicSharedOffset + static_cast<unsigned>(b - m.dynamicShared);
  failHere(std::string(what) + ": the pointer is not in the block's shared memory");
}

// A fiber's life: the kernel, then its end (cp.async copies left, releases it may allow).
void fiberMain() {
  Fiber& f = *g->current;
  g->function->entry(g->params);
  f.state = State::Done;
  if (!f.groups.empty() || !f.open.empty())
    setError("a thread ended with cp.async copies never waited for (" + std::to_string(f.groups.size()) +
                 " committed groups, " + std::to_string(f.open.size()) + " uncommitted copies)",
             &f);
  if (!f.wgGroups.empty() || !f.wgOpen.empty())
    setError("a thread ended with wgmma operations never waited for (" + std::to_string(f.wgGroups.size()) +
                 " committed groups, " + std::to_string(f.wgOpen.size()) +
                 " uncommitted operations): a wgmma.wait_group is missing",
             &f);
  --g->live;
  Warp& w = g->warps[f.thread.warp];
  w.live &= ~(1u << f.thread.lane);
  checkBarrier();
  checkWarp(f.thread.warp);
  if (f.thread.linear / 128 < g->groups.size()) checkGroup(f.thread.linear / 128);
  park();  // never resumed
  std::abort();
}

Fiber& fiber(unsigned i) {
  while (gFibers.size() <= i) {
    auto f = std::make_unique<Fiber>();
    void* m = mmap(nullptr, kStackBytes + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) throw Error("GPU emulator: cannot map a fiber stack");
    mprotect(m, kPage, PROT_NONE);  // a stack overflow faults instead of corrupting a neighbour
    f->stack = static_cast<char*>(m) + kPage;
#if !defined(GZ_EMU_FAST_SWITCH)
    getcontext(&f->context);
#endif
    gFibers.push_back(std::move(f));
  }
  return *gFibers[i];
}

std::string runBlock(unsigned bx, unsigned by, unsigned bz) {
  Run& r = *g;
  const LaunchShape& s = *r.shape;
  r.ctx.block = {bx, by, bz};
  // Shared memory starts as NaN bytes in every block: a read before any write shows.
  Module& m = *r.module;
  std::memset(m.staticShared, 0xff, *m.staticUsed);
  std::memset(m.dynamicShared, 0xff, s.sharedBytes);
  r.live = r.threads;
  r.atBarrier = 0;
  for (unsigned w = 0; w < r.warps.size(); ++w) {
    const unsigned lanes = std::min(32u, r.threads - w * 32);
    Warp& warp = r.warps[w];
    warp.existing = warp.live = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
    warp.arrived = 0;
    warp.generation = 0;
  }
  for (Group& group : r.groups) group.arrived = group.generation = 0;
  r.mbarriers.clear();
  for (unsigned i = 0; i < r.threads; ++i) {
    Fiber& f = fiber(i);
    f.thread.tid = {i % s.block[0], (i / s.block[0]) % s.block[1], i / (s.block[0] * s.block[1])};
    f.thread.linear = i;
    f.thread.lane = i % 32;
    f.thread.warp = i / 32;
    f.state = State::Ready;
    f.groups.clear();
    f.open.clear();
    f.wgGroups.clear();
    f.wgOpen.clear();
#if defined(GZ_EMU_FAST_SWITCH)
    // A new stack as gz_emu_switch leaves a parked one: six saved registers, then the address
    // it returns to (fiberMain, entered with the stack 16-byte aligned less 8 as after a call).
    auto* top = reinterpret_cast<void**>(static_cast<char*>(f.stack) + kStackBytes);
    top[-1] = nullptr;
    top[-2] = reinterpret_cast<void*>(&fiberMain);
    for (int k = 3; k <= 8; ++k) top[-k] = nullptr;
    f.sp = top - 8;
#else
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    makecontext(&f.context, fiberMain, 0);
#endif
  }
  // The first fiber in the order starts; the fibers hand on to each other (park) and come back
  // here when the launch failed, all ended, or none can run.
  r.position = 0;
  r.current = gFibers[r.order[0]].get();
  r.ctx.thread = &r.current->thread;
#if defined(GZ_EMU_FAST_SWITCH)
  gz_emu_switch(&r.scheduler, r.current->sp);
#else
  swapcontext(&r.scheduler, &r.current->context);
#endif
  if (!r.error.empty()) return r.error;
  if (r.live > 0) {
    for (unsigned i = 0; i < r.threads; ++i) {
      const Fiber& f = *gFibers[i];
      if (f.state != State::AtMbarrier) continue;
      const Mbarrier& b = r.mbarriers[f.mbarrier];
      setError("mbarrier.try_wait.parity: the phase of parity " + std::to_string(f.parity) +
                   " of the mbarrier at shared offset " + hex(f.mbarrier) + " can never complete (" +
                   std::to_string(b.pending) + " of " + std::to_string(b.expected) +
                   " arrivals pending, transaction count " + std::to_string(b.tx) +
                   " bytes: an arrive.expect_tx missing, bytes expected that no copy brings, or the barrier two phases "
                   "ahead of the wait)",
               &f);
      return r.error;
    }
    unsigned atBarrier = 0, atWarp = 0, atGroup = 0;
    for (unsigned i = 0; i < r.threads; ++i) {
      atBarrier += gFibers[i]->state == State::AtBarrier;
      atWarp += gFibers[i]->state == State::AtWarp;
      atGroup += gFibers[i]->state == State::AtGroup;
    }
    setError("the block can never finish: " + std::to_string(atBarrier) + " threads wait at __syncthreads, " +
                 std::to_string(atWarp) + " in warp collectives, " + std::to_string(atGroup) +
                 " in warpgroup collectives (wgmma), " + std::to_string(r.threads - r.live) +
                 " exited (a barrier or collective in divergent code)",
             nullptr);
    return r.error;
  }
  for (const auto& [bar, b] : r.mbarriers)
    if (!b.inFlight.empty())
      return "kernel " + r.function->name + ": the block ended with " + std::to_string(b.inFlight.size()) +
             " TMA copies on the mbarrier at shared offset " + hex(bar) + " never waited for" + where(nullptr);
  if (*m.staticUsed > kStaticSharedLimit)
    return "kernel " + r.function->name + ": " + std::to_string(*m.staticUsed) +
           " bytes of static __shared__ memory, more than CUDA's 48 KB";
  if (*m.staticUsed + static_cast<uint64_t>(s.sharedBytes) > s.sharedOptin)
    return "kernel " + r.function->name + ": " + std::to_string(*m.staticUsed) + " bytes of static and " +
           std::to_string(s.sharedBytes) + " of dynamic shared memory, more than the device's " +
           std::to_string(s.sharedOptin) + " a block";
  return "";
}

}  // namespace

std::string run(const Function& f, const LaunchShape& shape, void** params) {
  std::lock_guard<std::mutex> lock(kLaunchMutex);
  Run r;
  r.function = &f;
  r.shape = &shape;
  r.params = params;
  r.module = f.module;
  r.threads = shape.block[0] * shape.block[1] * shape.block[2];
  r.warps.resize((r.threads + 31) / 32);
  r.groups.resize(r.threads / 128);  // whole warpgroups only: threads past the last one cannot run wgmma
  // Threads run in index order unless GIZML_GPU_EMULATOR_SCHEDULE says "reverse" or "shuffle":
  // a kernel whose result changes with the order has a race (a read of another thread's write
  // with no barrier between), which one fixed order would hide.
  r.order.resize(r.threads);
  for (unsigned i = 0; i < r.threads; ++i) r.order[i] = i;
  static const std::string schedule = [] {
    const char* v = std::getenv("GIZML_GPU_EMULATOR_SCHEDULE");
    return std::string(v ? v : "");
  }();
  if (schedule == "reverse") {
    std::reverse(r.order.begin(), r.order.end());
  } else if (schedule == "shuffle") {
    static uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (unsigned i = r.threads; i > 1; --i) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(r.order[i - 1], r.order[(seed >> 33) % i]);
    }
  }
  r.ctx.blockDim = {shape.block[0], shape.block[1], shape.block[2]};
  r.ctx.gridDim = {shape.grid[0], shape.grid[1], shape.grid[2]};
  r.ctx.dynamicBytes = shape.sharedBytes;
  r.ctx.barrier = cbBarrier;
  r.ctx.warpSlots = cbWarpSlots;
  r.ctx.warpSync = cbWarpSync;
  r.ctx.activeMask = cbActiveMask;
  r.ctx.fail = cbFail;
  r.ctx.cpAsync = cbCpAsync;
  r.ctx.cpCommit = cbCpCommit;
  r.ctx.cpWait = cbCpWait;
  r.ctx.sharedAddress = cbSharedAddress;
  r.ctx.sharedOffset = cbSharedOffset;
  r.ctx.groupSlots = cbGroupSlots;
  r.ctx.groupSync = cbGroupSync;
  r.ctx.wgmmaIssue = cbWgmmaIssue;
  r.ctx.wgmmaPending = cbWgmmaPending;
  r.ctx.wgmmaCommit = cbWgmmaCommit;
  r.ctx.wgmmaWait = cbWgmmaWait;
  r.ctx.mbarInit = cbMbarInit;
  r.ctx.mbarArrive = cbMbarArrive;
  r.ctx.mbarWait = cbMbarWait;
  r.ctx.mbarCopy = cbMbarCopy;
  *f.module->ctx = &r.ctx;
  g = &r;
  struct Reset {
    ~Reset() { g = nullptr; }
  } reset;
  for (unsigned z = 0; z < shape.grid[2]; ++z)
    for (unsigned y = 0; y < shape.grid[1]; ++y)
      for (unsigned x = 0; x < shape.grid[0]; ++x) {
        std::string e = runBlock(x, y, z);
        if (!e.empty()) return e;
      }
  return "";
}

}  // namespace gizhw::gpu::emulator
