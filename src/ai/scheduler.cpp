// The scheduler thread of an engine: add when a slot is free, advance while requests run, hand
// each step's tokens to their jobs, cancel the jobs whose clients left.
#include "ai/scheduler.h"

#include <gizml/error.h>

namespace gizml::ai {

Job::Taken Job::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex);
  changed.wait_for(lock, timeout, [&] { return done || !tokens.empty(); });
  Taken t;
  t.tokens.swap(tokens);
  t.logprobs.swap(logprobs);
  t.done = done;
  t.finish = finish;
  t.errorStatus = errorStatus;
  t.error = error;
  return t;
}

Scheduler::Scheduler(llm::Engine engine) : engine_(std::move(engine)), maxTokens_(engine_.maxTokens()) {
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      queue_.push_back(job);
      wake_.notify_one();
      return;
    }
  }
  end(*job, llm::Finish::Cancelled, 503, "the server is shutting down");
}

void Scheduler::cancel(const std::shared_ptr<Job>& job) {
  job->cancelled = true;
  std::lock_guard lock(mutex_);
  wake_.notify_one();
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::end(Job& job, llm::Finish finish, int errorStatus, const std::string& error) {
  std::lock_guard lock(job.mutex);
  job.finish = finish;
  job.errorStatus = errorStatus;
  job.error = error;
  job.done = true;
  job.changed.notify_all();
}

void Scheduler::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Job>> joining;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !running_.empty(); });
      if (stopping_) break;
      std::erase_if(queue_, [&](const std::shared_ptr<Job>& j) {
        if (j->cancelled) end(*j, llm::Finish::Cancelled);
        return j->cancelled.load();
      });
      while (!queue_.empty() && engine_.running() + static_cast<int>(joining.size()) < engine_.slots()) {
        joining.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    for (const std::shared_ptr<Job>& job : joining) {
      try {
        running_[engine_.add(job->request)] = job;
      } catch (const std::exception& e) {
        end(*job, llm::Finish::Cancelled, 400, e.what());
      }
    }
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->second->cancelled) {
        engine_.cancel(it->first);
        end(*it->second, llm::Finish::Cancelled);
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
    if (running_.empty()) continue;
    std::vector<llm::Progress> steps;
    try {
      steps = engine_.advance();
    } catch (const std::exception& e) {
      // The engine has dropped every running request.
      for (auto& [id, job] : running_) end(*job, llm::Finish::Cancelled, 500, std::string("the model failed: ") + e.what());
      running_.clear();
      continue;
    }
    for (llm::Progress& p : steps) {
      const auto it = running_.find(p.request);
      if (it == running_.end()) continue;
      Job& job = *it->second;
      {
        std::lock_guard lock(job.mutex);
        job.tokens.insert(job.tokens.end(), p.tokens.begin(), p.tokens.end());
        for (llm::TokenLogprob& l : p.logprobs) job.logprobs.push_back(std::move(l));
        if (p.finish != llm::Finish::Running) {
          job.finish = p.finish;
          job.done = true;
        }
        job.changed.notify_all();
      }
      if (p.finish != llm::Finish::Running) running_.erase(it);
    }
  }
  // Stopping: every job still here ends.
  std::deque<std::shared_ptr<Job>> queued;
  {
    std::lock_guard lock(mutex_);
    queued.swap(queue_);
  }
  for (const auto& job : queued) end(*job, llm::Finish::Cancelled, 503, "the server is shutting down");
  for (auto& [id, job] : running_) {
    engine_.cancel(id);
    end(*job, llm::Finish::Cancelled, 503, "the server is shutting down");
  }
  running_.clear();
}

}  // namespace gizml::ai
