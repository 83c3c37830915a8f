#pragma once
// One thread per engine owns it: requests queue here, join the engine when a slot is free, and
// every step's tokens go to each request's Job, where its connection thread waits for them.
#include <gizml/llm.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gizml::ai {

using llm::TokenId;
using llm::Tokenizer;

/// A request (its n choices) and what it has given so far; shared by the scheduler and its
/// connection.
struct Job {
  llm::Request request;
  int choices = 1;  // OpenAI's n: run together on one read of the prompt (Engine::add)

  /// One choice's tokens not yet taken, their text (the engine's, safe to send), and its end.
  struct Choice {
    std::vector<TokenId> tokens;
    std::string text;
    std::vector<llm::TokenLogprob> logprobs;
    llm::Finish finish = llm::Finish::Running;
    bool done = false;
  };

  std::mutex mutex;
  std::condition_variable changed;
  // Guarded by mutex.
  std::vector<Choice> pending = std::vector<Choice>(1);  // done: its end waits to be taken
  std::vector<bool> ended = std::vector<bool>(1);
  int64_t cached = 0;  // prompt tokens its slot held already
  bool done = false;   // every choice ended, or the job failed
  int errorStatus = 0;  // 400: the engine refused the request; 500: the model failed; 503: shutdown
  std::string error;

  std::atomic<bool> cancelled{false};

  /// What a wait gave: each choice's new tokens and ends, and the job's end when it came.
  struct Taken {
    std::vector<Choice> choices;
    int64_t cached = 0;
    bool done = false;
    int errorStatus = 0;
    std::string error;
    bool empty() const;
  };
  /// Waits up to timeout for tokens or the end, and takes them.
  Taken take(std::chrono::milliseconds timeout);
};

class Scheduler {
 public:
  explicit Scheduler(llm::Engine engine);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void submit(const std::shared_ptr<Job>& job);
  /// The job ends (Cancelled) at the scheduler's next turn: queued or running.
  void cancel(const std::shared_ptr<Job>& job);
  /// Ends every job (503) and joins the thread.
  void stop();
  int64_t maxTokens() const { return maxTokens_; }

 private:
  void loop();
  void end(Job& job, llm::Finish finish, int errorStatus = 0, const std::string& error = "");

  llm::Engine engine_;  // only the scheduler thread touches it after construction
  int64_t maxTokens_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;  // guarded by mutex_
  bool stopping_ = false;                   // guarded by mutex_
  struct Place {
    std::shared_ptr<Job> job;
    size_t choice = 0;
  };
  std::map<int, Place> running_;  // by engine id; the scheduler thread's own
  std::thread thread_;
};

}  // namespace gizml::ai
