#pragma once
// RAII device resources for moejit's own tools and tests (check, bench, run, GPU tests):
// device buffers, streams, events and CUDA graphs, all through the dynamically loaded driver.

#include "driver.hpp"

#include <cstddef>
#include <functional>
#include <string>

namespace moejit::detail {

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
  void upload(const void* host, std::size_t bytes) const;
  void download(void* host, std::size_t bytes) const;

 private:
  const Driver* driver_ = nullptr;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  explicit Stream(const Driver& driver);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const noexcept { return stream_; }
  void synchronize() const;

 private:
  const Driver& driver_;
  CUstream stream_ = nullptr;
};

class Event {
 public:
  explicit Event(const Driver& driver);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const noexcept { return event_; }
  void record(CUstream stream) const;
  /// Milliseconds from `start` to this event (both recorded and complete).
  float since(const Event& start) const;

 private:
  const Driver& driver_;
  CUevent event_ = nullptr;
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
