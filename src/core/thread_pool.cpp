#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gizml::core {
namespace {

thread_local bool insideWorker = false;
thread_local bool singleThread = false;  // inside a SingleThreadScope

// How long a thread that waits spins before it sleeps: a decode step runs about 150 jobs of
// tens of microseconds each, and waking a thread whose core went idle costs as much as a job in
// a VM. Only while the machine has no other runnable work: a spinning thread never sleeps, and
// the kernel's scheduler then queues it behind the other processes for whole time slices (with
// eight compilers on two cores a 100 us spin took decode from 37-42 tok/s to 16).
constexpr int64_t kDefaultSpinMicros = 100;
// How often the caller looks at the machine's runnable tasks (/proc/loadavg).
constexpr auto kLoadCheckInterval = std::chrono::milliseconds(50);

// Whether no more tasks are runnable than `threads` (ours among them), by /proc/loadavg's fourth
// field ("running/total"); false where it cannot be read.
bool machineIdleFor(int threads) {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return false;
  double a = 0, b = 0, c = 0;
  int running = 0, total = 0;
  const bool read = std::fscanf(f, "%lf %lf %lf %d/%d", &a, &b, &c, &running, &total) == 5;
  std::fclose(f);
  return read && running <= threads;
}

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

class ThreadPool {
 public:
  ThreadPool(int threads, std::chrono::microseconds spin) : spin_(spin) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
  }
  ~ThreadPool() {
    state_.store(kStopping);
    {
      std::lock_guard lock(mutex_);
      wake_.notify_all();
    }
    for (auto& w : workers_) w.join();
  }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs body(task) for every task; the caller works too, and waits only for the workers that
  // joined in (one still asleep when the tasks are taken is not waited for). One job at a time.
  void run(int64_t tasks, const FunctionRef<void(int64_t)>& body) {
    std::lock_guard jobLock(jobMutex_);
    if (spin_.count() > 0 && std::chrono::steady_clock::now() >= nextLoadCheck_) {
      nextLoadCheck_ = std::chrono::steady_clock::now() + kLoadCheckInterval;
      spinning_.store(machineIdleFor(size()), std::memory_order_relaxed);
    }
    body_ = &body;
    tasks_ = tasks;
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    generation_ += 2;
    const uint64_t open = generation_ | 1;
    state_.store(open);  // publishes the job's fields
    if (sleepers_.load() > 0) notify(wake_);
    insideWorker = true;  // nested parallel calls from the caller's share run inline
    work();
    insideWorker = false;
    state_.store(generation_);  // closed: a worker arriving now leaves the job alone
    waitFor([this] { return busy_.load() == 0; }, callerSleeps_, idle_);
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static constexpr uint64_t kStopping = ~uint64_t{0};

  void work() {
    for (int64_t t; (t = next_.fetch_add(1, std::memory_order_relaxed)) < tasks_;) {
      try {
        (*body_)(t);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  // Wakes the sleepers on cv. Taking the mutex first means a sleeper has either checked its
  // condition already (and is waiting) or will see the change; notifying after releasing it
  // spares the woken thread blocking on the mutex at once.
  void notify(std::condition_variable& cv) {
    { std::lock_guard lock(mutex_); }
    cv.notify_all();
  }

  // Waits until done() holds: spins (yielding now and then) for spin_ if spinning_, then sleeps on `cv`
  // with `sleepers` counted, which whoever makes done() true checks before notifying.
  template <class Done>
  void waitFor(Done done, std::atomic<int>& sleepers, std::condition_variable& cv) {
    if (spinning_.load(std::memory_order_relaxed)) {
      // done() after every pause: a job's fields sit in a line this core shares until the other
      // thread writes it, so looking costs nothing, and checking every 16 pauses (a pause is ~60
      // TSC cycles on a Zen 5) made each hand-off ~500 cycles late on average, at both ends of
      // each of a decode step's ~180 jobs.
      const auto until = std::chrono::steady_clock::now() + spin_;
      for (int round = 1; !done(); ++round) {
        relax();
        if (round % 256 == 0) {
          if (std::chrono::steady_clock::now() >= until) break;
          std::this_thread::yield();
        }
      }
    }
    if (done()) return;
    std::unique_lock lock(mutex_);
    sleepers.fetch_add(1);
    cv.wait(lock, done);
    sleepers.fetch_sub(1);
  }

  void workerLoop() {
    insideWorker = true;
    uint64_t seen = 0;
    for (;;) {
      waitFor([&] { return state_.load() != seen; }, sleepers_, wake_);
      seen = state_.load();
      if (seen == kStopping) return;
      if ((seen & 1) == 0) continue;  // a job that closed before this thread saw it open
      busy_.fetch_add(1);
      if (state_.load() == seen) work();  // else it closed in between: its fields may be reused
      if (busy_.fetch_sub(1) == 1 && callerSleeps_.load() > 0) notify(idle_);
    }
  }

  // The atomics below stay sequentially consistent: each store-then-load pair (the caller closes
  // the job then reads busy_; a worker raises busy_ then reads state_; likewise the sleepers'
  // counts and the conditions they sleep on) relies on one of the two sides seeing the other.
  const std::chrono::microseconds spin_;
  std::atomic<bool> spinning_{false};  // whether waits spin for spin_ now (the machine is idle)
  std::chrono::steady_clock::time_point nextLoadCheck_{};  // the caller's
  std::vector<std::thread> workers_;
  std::mutex jobMutex_, mutex_;
  std::condition_variable wake_, idle_;
  // The job: generation_ * 2 + 1 while open, generation_ * 2 once its tasks are all taken.
  std::atomic<uint64_t> state_{0};
  uint64_t generation_ = 0;  // even; the caller's alone
  const FunctionRef<void(int64_t)>* body_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> busy_{0};         // workers inside the current job
  std::atomic<int> sleepers_{0};     // workers asleep on wake_
  std::atomic<int> callerSleeps_{0};  // the caller asleep on idle_
  std::exception_ptr error_;
};

int envInt(const char* name, int fallback, int least) {
  if (const char* env = std::getenv(name)) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= least && n <= 1 << 20) return static_cast<int>(n);
  }
  return fallback;
}

ThreadPool& pool() {
  static ThreadPool instance = [] {
    const unsigned hw = std::thread::hardware_concurrency();
    const int threads = envInt("GIZML_THREADS", hw == 0 ? 1 : static_cast<int>(hw), 1);
    return ThreadPool(threads, std::chrono::microseconds(envInt("GIZML_POOL_SPIN_US", kDefaultSpinMicros, 0)));
  }();
  return instance;
}

}  // namespace

int threadCount() { return singleThread ? 1 : pool().size(); }

SingleThreadScope::SingleThreadScope() : outer_(singleThread) { singleThread = true; }
SingleThreadScope::~SingleThreadScope() { singleThread = outer_; }

void parallelTasks(int64_t tasks, FunctionRef<void(int64_t)> body) {
  if (tasks <= 0) return;
  if (tasks == 1 || insideWorker || threadCount() == 1) {
    for (int64_t t = 0; t < tasks; ++t) body(t);
    return;
  }
  pool().run(tasks, body);
}

void parallelFor(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> body) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  const int64_t maxChunks = (n + grain - 1) / grain;
  const int64_t chunks = std::min<int64_t>(maxChunks, threadCount());
  if (chunks <= 1 || insideWorker) {
    body(0, n);
    return;
  }
  const int64_t step = (n + chunks - 1) / chunks;
  parallelTasks(chunks, [&](int64_t c) {
    const int64_t begin = c * step;
    const int64_t end = std::min(n, begin + step);
    if (begin < end) body(begin, end);
  });
}

void parallelSpans(int64_t tasks, FunctionRef<void(int64_t)> body) {
  const int64_t spans = std::min<int64_t>(threadCount(), tasks);
  if (spans <= 1 || insideWorker || tasks > 0xffffffff) {  // (a span's ends are 32-bit halves of a word)
    for (int64_t t = 0; t < tasks; ++t) body(t);
    return;
  }
  // Each span's tasks not yet taken, [front, back), in one word: taken from the front by the
  // span's own thread and from the back by the others.
  struct alignas(64) Span {
    std::atomic<uint64_t> open;
  };
  std::vector<Span> open(static_cast<size_t>(spans));
  for (int64_t s = 0; s < spans; ++s)
    open[static_cast<size_t>(s)].open.store(uint64_t(tasks * s / spans) << 32 | uint64_t(tasks * (s + 1) / spans));
  const auto take = [](Span& span, bool fromFront) -> int64_t {
    uint64_t range = span.open.load();
    for (;;) {
      const uint64_t front = range >> 32, back = range & 0xffffffffu;
      if (front >= back) return -1;
      const uint64_t next = fromFront ? (front + 1) << 32 | back : front << 32 | (back - 1);
      if (span.open.compare_exchange_weak(range, next)) return static_cast<int64_t>(fromFront ? front : back - 1);
    }
  };
  parallelTasks(spans, [&](int64_t mine) {
    for (int64_t t; (t = take(open[static_cast<size_t>(mine)], true)) >= 0;) body(t);
    for (int64_t k = 1; k < spans; ++k)
      for (int64_t t; (t = take(open[static_cast<size_t>((mine + k) % spans)], false)) >= 0;) body(t);
  });
}

}  // namespace gizml::core
