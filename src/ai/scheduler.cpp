// The scheduler thread of an engine: add when enough slots are free, advance while requests
// run, hand each step's tokens to their jobs' choices, cancel the jobs whose clients left.
#include "ai/scheduler.h"

#include <gizml/error.h>

#include <algorithm>
#include <utility>

namespace gizml::ai {

bool Job::Taken::empty() const {
  return std::all_of(choices.begin(), choices.end(), [](const Choice& c) { return c.tokens.empty() && !c.done; });
}

Job::Taken Job::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex);
  const auto ready = [&] {
    return done || std::any_of(pending.begin(), pending.end(), [](const Choice& c) { return !c.tokens.empty() || c.done; });
  };
  changed.wait_for(lock, timeout, ready);
  Taken t;
  t.choices.resize(pending.size());
  for (size_t i = 0; i < pending.size(); ++i) {
    Choice& c = pending[i];
    t.choices[i].tokens.swap(c.tokens);
    t.choices[i].text.swap(c.text);
    t.choices[i].logprobs.swap(c.logprobs);
    t.choices[i].done = std::exchange(c.done, false);  // an end is given once
    t.choices[i].finish = c.finish;
  }
  t.cached = cached;
  t.done = done;
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
    std::lock_guard lock(job->mutex);
    job->pending.assign(static_cast<size_t>(std::max(job->choices, 1)), {});
    job->ended.assign(job->pending.size(), false);
  }
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
  for (size_t i = 0; i < job.pending.size(); ++i)
    if (!job.ended[i]) job.ended[i] = true, job.pending[i].done = true, job.pending[i].finish = finish;
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
        // cancelled read once: a job leaves the queue only with its end given.
        if (j->cancelled) {
          end(*j, llm::Finish::Cancelled);
          return true;
        }
        if (j->choices <= engine_.slots()) return false;
        end(*j, llm::Finish::Cancelled, 400,
            "n = " + std::to_string(j->choices) + " needs as many slots; the engine has " +
                std::to_string(engine_.slots()));
        return true;
      });
      // In order: a job waits until all its choices fit.
      int free = engine_.freeSlots();
      while (!queue_.empty() && queue_.front()->choices <= free) {
        free -= queue_.front()->choices;
        joining.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    for (const std::shared_ptr<Job>& job : joining) {
      try {
        const std::vector<int> ids = engine_.add(job->request, job->choices);
        for (size_t i = 0; i < ids.size(); ++i) running_[ids[i]] = {job, i};
      } catch (const std::exception& e) {
        end(*job, llm::Finish::Cancelled, 400, e.what());
      }
    }
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->second.job->cancelled) {
        engine_.cancel(it->first);
        end(*it->second.job, llm::Finish::Cancelled);
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
      for (auto& [id, place] : running_)
        end(*place.job, llm::Finish::Cancelled, 500, std::string("the model failed: ") + e.what());
      running_.clear();
      continue;
    }
    for (llm::Progress& p : steps) {
      const auto it = running_.find(p.request);
      if (it == running_.end()) continue;
      Job& job = *it->second.job;
      {
        std::lock_guard lock(job.mutex);
        Job::Choice& c = job.pending[it->second.choice];
        c.tokens.insert(c.tokens.end(), p.tokens.begin(), p.tokens.end());
        c.text += p.text;
        for (llm::TokenLogprob& l : p.logprobs) c.logprobs.push_back(std::move(l));
        if (it->second.choice == 0) job.cached = p.cached;
        if (p.finish != llm::Finish::Running) {
          c.finish = p.finish;
          c.done = true;
          job.ended[it->second.choice] = true;
          job.done = std::all_of(job.ended.begin(), job.ended.end(), [](bool e) { return e; });
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
  for (auto& [id, place] : running_) {
    engine_.cancel(id);
    end(*place.job, llm::Finish::Cancelled, 503, "the server is shutting down");
  }
  running_.clear();
}

}  // namespace gizml::ai
