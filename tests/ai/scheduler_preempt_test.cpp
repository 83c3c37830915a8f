// The scheduler over an engine whose KV pool runs short: requests that the engine preempts
// produce no tokens for a while; the scheduler neither ends nor fails them, and each job's
// answer is the one its request gives alone.
#include <gtest/gtest.h>

#include "ai/scheduler.h"
#include "llm/pool_fixture.h"

using namespace gizml;
using gizml::ai::Job;

namespace {

// Takes a job's tokens until its end.
std::vector<TokenId> answer(Job& job, int& errorStatus) {
  std::vector<TokenId> out;
  for (;;) {
    Job::Taken t = job.take(std::chrono::milliseconds(50));
    out.insert(out.end(), t.choices[0].tokens.begin(), t.choices[0].tokens.end());
    errorStatus = t.errorStatus;
    if (t.done) return out;
  }
}

TEST(SchedulerPreempt, JobsWhosePagesTheEngineTakesBackEndAsAlone) {
  // Three prompts of two pages each in a pool of four: at most two read at once.
  std::vector<std::shared_ptr<Job>> jobs;
  {
    ai::Scheduler scheduler(llm::Engine(llama(), nullptr, {}, 3, 1024, 4 * 256));
    for (unsigned i = 0; i < 3; ++i) {
      auto job = std::make_shared<Job>();
      job->request = request(tokens(300, 20 + i), 20);
      scheduler.submit(job);
      jobs.push_back(job);
    }
    for (const auto& job : jobs) {
      int errorStatus = 0;
      const std::vector<TokenId> got = answer(*job, errorStatus);
      EXPECT_EQ(errorStatus, 0);
      llm::Engine alone(llama(), nullptr, {}, 1, 1024);
      EXPECT_EQ(got, alone.generate({job->request})[0].tokens);
    }
  }
}

}  // namespace
