#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gizml::core {
namespace {

thread_local bool insideWorker = false;

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs body(task) for every task; the caller works too. One job at a time.
  void run(int64_t tasks, const std::function<void(int64_t)>& body) {
    std::lock_guard jobLock(jobMutex_);
    {
      std::lock_guard lock(mutex_);
      body_ = &body;
      tasks_ = tasks;
      next_.store(0);
      pending_ = static_cast<int>(workers_.size());
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    insideWorker = true;  // nested parallel calls from the caller's share run inline
    work();
    insideWorker = false;
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work() {
    for (int64_t t; (t = next_.fetch_add(1)) < tasks_;) {
      try {
        (*body_)(t);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void workerLoop() {
    insideWorker = true;
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      work();
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex jobMutex_, mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0};
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

int configuredThreads() {
  if (const char* env = std::getenv("GIZML_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

ThreadPool& pool() {
  static ThreadPool instance(configuredThreads());
  return instance;
}

}  // namespace

int threadCount() { return pool().size(); }

void parallelTasks(int64_t tasks, const std::function<void(int64_t)>& body) {
  if (tasks <= 0) return;
  if (tasks == 1 || insideWorker || threadCount() == 1) {
    for (int64_t t = 0; t < tasks; ++t) body(t);
    return;
  }
  pool().run(tasks, body);
}

void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
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

}  // namespace gizml::core
