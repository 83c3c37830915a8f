// Gpu::capture and Graph: stream capture into a CUDA (or HIP) graph, instantiated once and
// launched as often as asked.
#include "gpu/device.h"

namespace gizhw::gpu {

bool Gpu::canCapture() const { return device_->api.streamBeginCapture != nullptr; }

Graph Gpu::capture(const Stream& stream, const std::function<void()>& work) const {
  device_->activate();
  const DriverApi& api = device_->api;
  if (!canCapture()) throw Error("capture: the driver of " + describe() + " (" + api.library + ") has no graphs");
  device_->check(api.streamBeginCapture(stream.handle(), api.captureThreadLocal), "cuStreamBeginCapture");
  Handle graph = nullptr;
  try {
    work();
  } catch (...) {
    // The capture ends either way; a graph from it (or none, when it was invalidated) is dropped.
    if (api.streamEndCapture(stream.handle(), &graph) == 0 && graph) api.graphDestroy(graph);
    throw;
  }
  device_->check(api.streamEndCapture(stream.handle(), &graph), "cuStreamEndCapture");
  Handle exec = nullptr;
  const int instantiated = api.graphInstantiate(&exec, graph, 0);
  api.graphDestroy(graph);
  device_->check(instantiated, "cuGraphInstantiate");
  Graph g;
  g.device_ = device_;
  std::shared_ptr<Device> owner = device_;
  g.exec_ = std::shared_ptr<void>(exec, [owner](void* h) {
    if (!owner->closed()) owner->api.graphExecDestroy(h);
  });
  return g;
}

void Graph::launch(const Stream& stream) const {
  if (!device_) throw Error("launch: an empty graph");
  device_->activate();
  device_->check(device_->api.graphLaunch(exec_.get(), stream.handle()), "cuGraphLaunch");
}

}  // namespace gizhw::gpu
