#pragma once
// The side of a StepGraph (gizhw/gpu.h) that the device's calls see: while a step records or
// replays on this thread, each launch, allocation, copy and fill on that device's stream goes
// through its session first (device.cpp), which records it, or checks it against the recording
// and says whether it was served.
#include <gizhw/gpu.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "gpu/driver_api.h"

namespace gizhw::gpu {

class StepSession {
 public:
  virtual ~StepSession() = default;
  /// true: the launch is the recording's (a replay): not queued. `argSizes`: each argument's bytes
  /// as the caller knows them (empty: the driver's word only).
  virtual bool launch(void* function, Dim3 grid, Dim3 block, size_t sharedBytes, void** args,
                      std::span<const size_t> argSizes) = 0;
  /// The recording's buffer (a replay), or `fresh()`'s, kept by the recording when it records.
  virtual Buffer allocate(size_t bytes, const std::function<Buffer()>& fresh) = 0;
  /// true: the bytes went where the recording reads them (queued from there while recording).
  virtual bool copyToDevice(DevicePtr dst, const void* src, size_t bytes) = 0;
  /// true: the copy or fill is the recording's (a replay): not queued.
  virtual bool copyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes) = 0;
  virtual bool fill(DevicePtr dst, unsigned char value, size_t bytes) = 0;
  /// Device memory read back, or a wait for the GPU: `what` says which. A recording cannot hold
  /// it (an Error that ends the recording); a replay goes on directly from here.
  virtual void readsBack(const char* what) = 0;
};

/// The session of `device`'s stream on this thread, or null. A thread without one waits while
/// another thread records on the device (its work would be recorded with the step).
StepSession* stepSession(Device& device, Handle stream);

}  // namespace gizhw::gpu
