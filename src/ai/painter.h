#pragma once
// The server's image engine: one thread per image model paints its requests one after another,
// off the connection threads and the language models' schedulers (the CPU's thread pool is
// shared; their parallel loops take turns). A request whose client leaves stops at the next step.
#include <gizml/ai.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ai/images.h"

namespace gizml::ai {

/// One images request on its way through a Painter.
class PaintJob {
 public:
  explicit PaintJob(ImageRequest request) : request(std::move(request)) {}
  const ImageRequest request;

  /// Waits up to `wait` for the job to end; true when it has.
  bool wait(std::chrono::milliseconds wait);
  /// Asks the painter to stop it (at its next step, or before it starts).
  void cancel();
  /// Once ended: the PNG files, or the error that stopped it: the prompt's (the text encoder
  /// refused it: promptError) or another.
  const std::vector<std::vector<uint8_t>>& pngs() const { return pngs_; }
  const std::string& error() const { return error_; }
  bool promptError() const { return promptError_; }

 private:
  friend class Painter;
  std::mutex mutex_;
  std::condition_variable ended_;
  bool done_ = false, cancelled_ = false, promptError_ = false;
  std::vector<std::vector<uint8_t>> pngs_;
  std::string error_;
};

class Painter {
 public:
  /// upsampler: for the jobs that ask for it (null: none asks, the parser refused them).
  explicit Painter(ImagePipeline pipeline, std::shared_ptr<const diffusion::Upsampler> upsampler = nullptr);
  ~Painter();
  Painter(const Painter&) = delete;
  Painter& operator=(const Painter&) = delete;

  void submit(const std::shared_ptr<PaintJob>& job);
  /// Ends the waiting jobs (cancelled) and the running one at its next step; joins the thread.
  void stop();

 private:
  void run();
  void paint(PaintJob& job);
  ImagePipeline pipeline_;
  std::shared_ptr<const diffusion::Upsampler> upsampler_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<PaintJob>> queue_;
  std::shared_ptr<PaintJob> running_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gizml::ai
