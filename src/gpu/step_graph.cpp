// StepGraph (gizhw/gpu.h): a step recorded once by stream capture and replayed, its host code run
// again each time to check its work against the recording and to write its new inputs.
#include "gpu/step_graph.h"

#include <cstring>
#include <vector>

#include "gpu/device.h"

namespace gizhw::gpu {
namespace {

thread_local StepSession* tSession = nullptr;
thread_local Device* tSessionDevice = nullptr;

constexpr size_t kStagingChunk = size_t{1} << 20;

}  // namespace

StepSession* stepSession(Device& device, Handle stream) {
  if (tSessionDevice == &device) return stream == device.stream.handle() ? tSession : nullptr;
  const std::thread::id recorder = device.recorder.load(std::memory_order_acquire);
  if (recorder != std::thread::id() && recorder != std::this_thread::get_id())
    std::lock_guard<std::mutex> wait(device.recordingMutex);
  return nullptr;
}

// One queued operation of the recorded step, with what a replay compares.
struct RecordedOp {
  enum class Kind { Launch, Allocate, Upload, DeviceCopy, Fill } kind = Kind::Launch;
  void* function = nullptr;
  Dim3 grid, block;
  size_t sharedBytes = 0;
  std::vector<size_t> argSizes;
  std::vector<uint8_t> args;  // the arguments' bytes, one after another
  DevicePtr dst = 0, src = 0;
  size_t bytes = 0;
  unsigned char value = 0;
  size_t chunk = 0, offset = 0;  // Upload: where its bytes are staged
  Buffer buffer;                 // Allocate
};

struct StepGraph::State {
  explicit State(Gpu g) : gpu(std::move(g)) {}
  Gpu gpu;
  size_t runs = 0;
  bool never = false;  // a step could not be recorded
  bool stale = true;   // no recording, or the last run left it
  std::vector<RecordedOp> ops;
  std::vector<PinnedBuffer> staging;  // the uploads' bytes: a replay writes them where the graph reads
  size_t stagingUsed = 0;             // of the last chunk
  std::shared_ptr<void> exec;         // the instantiated graph

  Device& device() const { return *gpu.device(); }
};

namespace {

// Ends a capture, instantiates what it holds and launches it once (an empty capture: nothing).
// The graph, when kept, goes to `keep`.
void launchCaptured(const std::shared_ptr<Device>& owner, std::shared_ptr<void>* keep) {
  Device& d = *owner;
  const DriverApi& api = d.api;
  Handle graph = nullptr;
  d.check(api.streamEndCapture(d.stream.handle(), &graph), "cuStreamEndCapture");
  Handle exec = nullptr;
  const int instantiated = api.graphInstantiate(&exec, graph, 0);
  api.graphDestroy(graph);
  d.check(instantiated, "cuGraphInstantiate");
  std::shared_ptr<void> held(exec, [owner](void* h) {
    if (!owner->closed()) owner->api.graphExecDestroy(h);
  });
  d.check(api.graphLaunch(exec, d.stream.handle()), "cuGraphLaunch");
  d.graphLaunches.fetch_add(1, std::memory_order_relaxed);
  if (keep) *keep = std::move(held);
  else d.check(api.streamSynchronize(d.stream.handle()), "cuStreamSynchronize");  // before its destruction
}

class Session final : public StepSession {
 public:
  Session(StepGraph::State& state, bool recording) : state_(state), recording_(recording) {
    tSession = this;
    tSessionDevice = &state.device();
  }
  ~Session() override { end(); }
  void end() {
    if (tSession != this) return;
    tSession = nullptr;
    tSessionDevice = nullptr;
  }
  bool diverged() const { return diverged_; }
  size_t matched() const { return cursor_; }

  bool launch(void* function, Dim3 grid, Dim3 block, size_t sharedBytes, void** args,
              std::span<const size_t> argSizes) override {
    std::optional<std::vector<size_t>> sizes = state_.device().parameterSizes(function);
    if (!sizes && !argSizes.empty()) sizes.emplace(argSizes.begin(), argSizes.end());  // HIP: the caller's word
    if (recording_ && !sizes) {
      cannotRecord();  // neither the driver nor the caller says how many bytes its arguments are
      return false;
    }
    if (recording_) {
      RecordedOp op;
      op.kind = RecordedOp::Kind::Launch;
      op.function = function;
      op.grid = grid;
      op.block = block;
      op.sharedBytes = sharedBytes;
      op.argSizes = *sizes;
      for (size_t i = 0; i < sizes->size(); ++i) {
        const auto* bytes = static_cast<const uint8_t*>(args[i]);
        op.args.insert(op.args.end(), bytes, bytes + (*sizes)[i]);
      }
      state_.ops.push_back(std::move(op));
      return false;
    }
    const RecordedOp* op = next(RecordedOp::Kind::Launch);
    bool same = op && sizes && op->function == function && sameDim(op->grid, grid) && sameDim(op->block, block) &&
                op->sharedBytes == sharedBytes && op->argSizes == *sizes;
    for (size_t i = 0, at = 0; same && i < op->argSizes.size(); at += op->argSizes[i], ++i)
      same = std::memcmp(op->args.data() + at, args[i], op->argSizes[i]) == 0;
    return served(same);
  }

  Buffer allocate(size_t bytes, const std::function<Buffer()>& fresh) override {
    if (recording_) {
      RecordedOp op;
      op.kind = RecordedOp::Kind::Allocate;
      op.bytes = bytes;
      op.buffer = fresh();
      state_.ops.push_back(op);
      return op.buffer;
    }
    const RecordedOp* op = next(RecordedOp::Kind::Allocate);
    if (served(op && op->bytes == bytes)) return op->buffer;
    return fresh();
  }

  bool copyToDevice(DevicePtr dst, const void* src, size_t bytes) override {
    if (recording_) {
      RecordedOp op;
      op.kind = RecordedOp::Kind::Upload;
      op.dst = dst;
      op.bytes = bytes;
      stage(op);
      std::memcpy(staged(op), src, bytes);
      const DriverApi& api = state_.device().api;
      state_.device().check(api.memcpyHtoDAsync(dst, staged(op), bytes, state_.device().stream.handle()),
                            "cuMemcpyHtoDAsync");
      state_.ops.push_back(op);
      return true;
    }
    const RecordedOp* op = next(RecordedOp::Kind::Upload);
    if (!served(op && op->dst == dst && op->bytes == bytes)) return false;
    std::memcpy(staged(*op), src, bytes);
    return true;
  }

  bool copyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes) override {
    return recordOrServe(onDevice(RecordedOp::Kind::DeviceCopy, dst, src, bytes, 0));
  }

  bool fill(DevicePtr dst, unsigned char value, size_t bytes) override {
    return recordOrServe(onDevice(RecordedOp::Kind::Fill, dst, 0, bytes, value));
  }

  void readsBack(const char*) override {
    if (recording_) return cannotRecord();
    served(false);
  }

  /// A recording that meets what it cannot hold: what it holds so far runs now, the rest of the
  /// step goes on directly, and the StepGraph never records again.
  void cannotRecord() {
    end();
    recording_ = false;
    state_.never = true;
    // (The operations and their memory go at the next run: this may be inside the allocator.)
    launchCaptured(state_.gpu.device(), nullptr);
  }
  bool recording() const { return recording_; }

  /// A replay whose work left the recording: the operations it matched so far, which were not
  /// queued, are queued now as recorded (their arguments were this run's own), and the run goes
  /// on directly.
  void diverge() {
    end();
    diverged_ = true;
    Device& d = state_.device();
    const DriverApi& api = d.api;
    const Handle stream = d.stream.handle();
    for (size_t i = 0; i < cursor_; ++i) {
      RecordedOp& op = state_.ops[i];
      switch (op.kind) {
        case RecordedOp::Kind::Launch: {
          std::vector<void*> params;
          for (size_t k = 0, at = 0; k < op.argSizes.size(); at += op.argSizes[k], ++k) params.push_back(op.args.data() + at);
          d.launches.fetch_add(1, std::memory_order_relaxed);
          d.check(api.launchKernel(op.function, op.grid.x, op.grid.y, op.grid.z, op.block.x, op.block.y, op.block.z,
                                   static_cast<unsigned>(op.sharedBytes), stream, params.data(), nullptr),
                  "cuLaunchKernel");
          break;
        }
        case RecordedOp::Kind::Upload:
          d.check(api.memcpyHtoDAsync(op.dst, staged(op), op.bytes, stream), "cuMemcpyHtoDAsync");
          break;
        case RecordedOp::Kind::DeviceCopy:
          d.check(api.memcpyDtoDAsync(op.dst, op.src, op.bytes, stream), "cuMemcpyDtoDAsync");
          break;
        case RecordedOp::Kind::Fill:
          d.check(api.memsetD8Async(op.dst, op.value, op.bytes, stream), "cuMemsetD8Async");
          break;
        case RecordedOp::Kind::Allocate:
          break;
      }
    }
  }

 private:
  static bool sameDim(Dim3 a, Dim3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

  const RecordedOp* next(RecordedOp::Kind kind) const {
    if (cursor_ >= state_.ops.size() || state_.ops[cursor_].kind != kind) return nullptr;
    return &state_.ops[cursor_];
  }
  static RecordedOp onDevice(RecordedOp::Kind kind, DevicePtr dst, DevicePtr src, size_t bytes, unsigned char value) {
    RecordedOp op;
    op.kind = kind;
    op.dst = dst;
    op.src = src;
    op.bytes = bytes;
    op.value = value;
    return op;
  }
  // A copy on the device or a fill: recorded (the caller queues it into the capture), or served
  // where it is the recording's.
  bool recordOrServe(RecordedOp op) {
    if (recording_) {
      state_.ops.push_back(std::move(op));
      return false;
    }
    const RecordedOp* at = next(op.kind);
    return served(at && at->dst == op.dst && at->src == op.src && at->bytes == op.bytes && at->value == op.value);
  }
  // A replayed operation that matched is served (true); one that did not ends the replay here.
  bool served(bool same) {
    if (same) {
      ++cursor_;
      return true;
    }
    diverge();
    return false;
  }

  void stage(RecordedOp& op) {
    if (state_.staging.empty() || state_.stagingUsed + op.bytes > state_.staging.back().bytes()) {
      state_.staging.push_back(state_.gpu.allocatePinned(std::max(kStagingChunk, op.bytes)));
      state_.stagingUsed = 0;
    }
    op.chunk = state_.staging.size() - 1;
    op.offset = state_.stagingUsed;
    state_.stagingUsed += (op.bytes + 15) / 16 * 16;
  }
  void* staged(const RecordedOp& op) const {
    return static_cast<uint8_t*>(state_.staging[op.chunk].data()) + op.offset;
  }

  StepGraph::State& state_;
  bool recording_;
  bool diverged_ = false;
  size_t cursor_ = 0;
};

}  // namespace

StepGraph::StepGraph(Gpu gpu) : state_(std::make_unique<State>(std::move(gpu))) {}
StepGraph::~StepGraph() {
  // A recording's staging may still be read by its last launch.
  if (state_ && state_->exec && !state_->gpu.closed()) state_->gpu.synchronize();
}
StepGraph::StepGraph(StepGraph&&) noexcept = default;
StepGraph& StepGraph::operator=(StepGraph&&) noexcept = default;

bool StepGraph::recordable() const { return !state_->never; }

StepGraph::Ran StepGraph::run(const std::function<void()>& step) {
  State& s = *state_;
  Device& d = s.device();
  const DriverApi& api = d.api;
  const bool canRecord = api.streamBeginCapture && tSession == nullptr;
  if (s.never) s.ops.clear();  // what a try at recording kept
  if (s.runs++ == 0 || s.never || !canRecord) {
    step();  // the first run compiles its kernels and fills the allocator's cache
    return Ran::Directly;
  }
  // The previous run's work (and a recording's launch) may still read the staging.
  s.gpu.synchronize();
  if (!s.stale) {
    Session replay(s, false);
    step();
    replay.end();
    if (!replay.diverged() && replay.matched() == s.ops.size()) {
      d.check(api.graphLaunch(s.exec.get(), d.stream.handle()), "cuGraphLaunch");
      d.graphLaunches.fetch_add(1, std::memory_order_relaxed);
      return Ran::Replayed;
    }
    if (!replay.diverged()) replay.diverge();  // it did less than the recording: what it did is queued now
    s.stale = true;
    return Ran::Directly;
  }
  // Record: nothing of the old recording runs any more (the synchronize above).
  s.exec.reset();
  s.ops.clear();
  s.staging.clear();
  s.stagingUsed = 0;
  std::lock_guard<std::mutex> others(d.recordingMutex);
  d.recorder.store(std::this_thread::get_id(), std::memory_order_release);
  struct Clear {
    Device& d;
    ~Clear() { d.recorder.store(std::thread::id(), std::memory_order_release); }
  } clear{d};
  d.activate();
  d.check(api.streamBeginCapture(d.stream.handle(), api.captureRelaxed), "cuStreamBeginCapture");
  Session record(s, true);
  try {
    step();
  } catch (...) {
    if (record.recording()) {
      record.end();
      Handle graph = nullptr;
      if (api.streamEndCapture(d.stream.handle(), &graph) == 0 && graph) api.graphDestroy(graph);
      s.ops.clear();
    }
    throw;
  }
  if (!record.recording()) return Ran::Directly;  // it met what a recording cannot hold
  record.end();
  launchCaptured(s.gpu.device(), &s.exec);
  s.stale = false;
  return Ran::Recorded;
}

}  // namespace gizhw::gpu
