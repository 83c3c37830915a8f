// The image models' threads (painter.h).
#include "ai/painter.h"

#include <gizml/error.h>
#include <gizml/image.h>

#include <type_traits>

namespace gizml::ai {
namespace {

// Thrown from a step callback to leave paint early.
struct Cancelled {};

}  // namespace

bool PaintJob::wait(std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  return ended_.wait_for(lock, wait, [this] { return done_; });
}

void PaintJob::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

Painter::Painter(ImagePipeline pipeline, std::shared_ptr<const diffusion::Upsampler> upsampler)
    : pipeline_(std::move(pipeline)), upsampler_(std::move(upsampler)), thread_([this] { run(); }) {}

Painter::~Painter() { stop(); }

void Painter::submit(const std::shared_ptr<PaintJob>& job) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(job);
  }
  wake_.notify_one();
}

void Painter::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const auto& job : queue_) job->cancel();
    if (running_) running_->cancel();
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Painter::run() {
  for (;;) {
    std::shared_ptr<PaintJob> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = running_ = std::move(queue_.front());
      queue_.pop_front();
    }
    paint(*job);
    {
      std::lock_guard lock(mutex_);
      running_.reset();
    }
    {
      std::lock_guard lock(job->mutex_);
      job->done_ = true;
    }
    job->ended_.notify_all();
  }
}

void Painter::paint(PaintJob& job) {
  const ImageRequest& r = job.request;
  const auto checkCancelled = [&](const diffusion::ZImageStep&) {
    std::lock_guard lock(job.mutex_);
    if (job.cancelled_) throw Cancelled{};
  };
  std::vector<std::vector<uint8_t>> pngs;
  try {
    checkCancelled({});
    // The upsampler first (sampled with the request's seed), then the layout's table.
    std::string prompt = r.upsample ? upsampler_->caption(r.prompt, r.pictures, r.seed) : r.prompt;
    prompt = diffusion::fluxLayout(prompt, r.layout);
    checkCancelled({});
    // paint's stages, the conditioning (caption and pictures) read once for the n images. Only the
    // prompt can make condition throw (longer than the encoder's context): the pictures were
    // checked when the request was read.
    std::visit(
        [&](const auto& pipeline) {
          constexpr bool klein = std::is_same_v<std::decay_t<decltype(pipeline)>, diffusion::KleinPipeline>;
          const auto conditioning = [&] {
            try {
              if constexpr (klein) return pipeline.condition(prompt, r.pictures);
              else return pipeline.condition(prompt);
            } catch (const Error&) {
              job.promptError_ = true;
              throw;
            }
          }();
          for (int i = 0; i < r.n; ++i) {
            const uint64_t seed = r.seed + static_cast<uint64_t>(i);
            tensor::Tensor latent;
            if constexpr (klein) latent = pipeline.sample(conditioning, seed, r.width, r.height, checkCancelled);
            else latent = pipeline.sampleWith(conditioning, seed, r.width, r.height, checkCancelled);
            pngs.push_back(image::encodePng(pipeline.decode(latent)));
          }
        },
        pipeline_);
  } catch (const Cancelled&) {
    job.error_ = "cancelled";
  } catch (const std::exception& e) {
    job.error_ = e.what();
  }
  if (job.error_.empty()) job.pngs_ = std::move(pngs);
}

}  // namespace gizml::ai
