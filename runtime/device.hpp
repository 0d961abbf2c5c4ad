#pragma once
// RAII device resources for the runtime, the tools and the tests: device buffers, streams, events,
// CUDA graphs, host-mapped memory, IPC mappings and retained primary contexts, all through the
// dynamically loaded driver. The movable ones start empty when default-constructed.

#include "driver.hpp"

#include <cstddef>
#include <functional>
#include <string>

namespace moejit::detail {

/// Host to device, landed when it returns: from pageable memory cuMemcpyHtoD may return before
/// its DMA lands, and the kernels of a non-blocking stream do not wait for it.
void copy_to_device(const Driver& driver, CUdeviceptr dst, const void* host, std::size_t bytes);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Driver& driver, std::size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* ptr() const noexcept { return reinterpret_cast<void*>(ptr_); }
  CUdeviceptr address() const noexcept { return ptr_; }
  std::size_t bytes() const noexcept { return bytes_; }
  void upload(const void* host, std::size_t bytes) const;  ///< copy_to_device: landed when it returns
  void download(void* host, std::size_t bytes) const;

 private:
  const Driver* driver_ = nullptr;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  Stream() = default;
  /// A non-blocking stream (CU_STREAM_NON_BLOCKING) in the current context.
  explicit Stream(const Driver& driver);
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  CUstream get() const noexcept { return stream_; }
  void synchronize() const;

 private:
  const Driver* driver_ = nullptr;
  CUstream stream_ = nullptr;
  void reset() noexcept;
};

class Event {
 public:
  Event() = default;
  /// `flags`: CU_EVENT_DISABLE_TIMING for an event that only orders streams.
  explicit Event(const Driver& driver, unsigned flags = CU_EVENT_DEFAULT);
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();
  CUevent get() const noexcept { return event_; }
  void record(CUstream stream) const;
  /// Milliseconds from `start` to this event (both recorded and complete).
  float since(const Event& start) const;

 private:
  const Driver* driver_ = nullptr;
  CUevent event_ = nullptr;
  void reset() noexcept;
};

/// Zeroed pinned host memory mapped into every context's address space (cuMemHostAlloc with
/// DEVICEMAP | PORTABLE): flags a kernel sets and the host reads without a copy.
class MappedHostBuffer {
 public:
  MappedHostBuffer() = default;
  MappedHostBuffer(const Driver& driver, std::size_t bytes);
  MappedHostBuffer(MappedHostBuffer&& o) noexcept;
  MappedHostBuffer& operator=(MappedHostBuffer&& o) noexcept;
  MappedHostBuffer(const MappedHostBuffer&) = delete;
  MappedHostBuffer& operator=(const MappedHostBuffer&) = delete;
  ~MappedHostBuffer();

  void* host() const noexcept { return host_; }
  CUdeviceptr device() const noexcept { return device_; }

 private:
  const Driver* driver_ = nullptr;
  void* host_ = nullptr;
  CUdeviceptr device_ = 0;
  void reset() noexcept;
};

/// Another process's device buffer, mapped into this context from its CUDA IPC handle.
class IpcMapping {
 public:
  IpcMapping(const Driver& driver, const CUipcMemHandle& handle, unsigned flags);
  IpcMapping(IpcMapping&& o) noexcept;
  IpcMapping& operator=(IpcMapping&& o) noexcept;
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  ~IpcMapping();

  CUdeviceptr address() const noexcept { return ptr_; }

 private:
  const Driver* driver_ = nullptr;
  CUdeviceptr ptr_ = 0;
  void reset() noexcept;
};

/// A reference on a device's primary context (cuDevicePrimaryCtxRetain), released on destruction.
class PrimaryContext {
 public:
  PrimaryContext(const Driver& driver, CUdevice device);
  PrimaryContext(PrimaryContext&& o) noexcept;
  PrimaryContext& operator=(PrimaryContext&& o) noexcept;
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;
  ~PrimaryContext();

  CUcontext get() const noexcept { return context_; }

 private:
  const Driver* driver_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  void reset() noexcept;
};

/// A CUDA graph captured from a stream and instantiated.
class Graph {
 public:
  /// Captures whatever `body` enqueues on `stream`.
  Graph(const Driver& driver, const Stream& stream, const std::function<void()>& body);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch(const Stream& stream) const;

 private:
  const Driver& driver_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

/// Times `calls` back-to-back enqueues of `body` captured in one graph: replays it `replays`
/// times after a warm replay and returns the median microseconds per call (performance.md).
double time_per_call_us(const Driver& driver, const Stream& stream, int calls, int replays,
                        const std::function<void(int call)>& body);

}  // namespace moejit::detail
