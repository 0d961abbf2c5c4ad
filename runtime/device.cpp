#include "device.hpp"

#include <moejit/error.hpp>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace moejit::detail {

DeviceBuffer::DeviceBuffer(const Driver& driver, std::size_t bytes) : driver_(&driver), bytes_(bytes) {
  // NOTE: an empty tensor still gets a real (1-byte) allocation, so its pointer is valid.
  MOEJIT_CU(driver, cuMemAlloc(&ptr_, std::max<std::size_t>(bytes, 1)));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : driver_(o.driver_), ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = 0;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) driver_->cuMemFree(ptr_);
    driver_ = o.driver_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver_->cuMemFree(ptr_);
}

void copy_to_device(const Driver& driver, CUdeviceptr dst, const void* host, std::size_t bytes) {
  if (!bytes) return;
  MOEJIT_CU(driver, cuMemcpyHtoD(dst, host, bytes));
  MOEJIT_CU(driver, cuStreamSynchronize(CU_STREAM_LEGACY));  // the copy's stream: its DMA landed
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) const { copy_to_device(*driver_, ptr_, host, bytes); }

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes) MOEJIT_CU(*driver_, cuMemcpyDtoH(host, ptr_, bytes));
}

Stream::Stream(const Driver& driver) : driver_(&driver) {
  MOEJIT_CU(driver, cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
}

Stream::Stream(Stream&& o) noexcept : driver_(o.driver_), stream_(std::exchange(o.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this == &o) return *this;
  reset();
  driver_ = o.driver_;
  stream_ = std::exchange(o.stream_, nullptr);
  return *this;
}

Stream::~Stream() { reset(); }

void Stream::reset() noexcept {
  if (stream_) driver_->cuStreamDestroy(std::exchange(stream_, nullptr));
}

void Stream::synchronize() const { MOEJIT_CU(*driver_, cuStreamSynchronize(stream_)); }

Event::Event(const Driver& driver, unsigned flags) : driver_(&driver) { MOEJIT_CU(driver, cuEventCreate(&event_, flags)); }

Event::Event(Event&& o) noexcept : driver_(o.driver_), event_(std::exchange(o.event_, nullptr)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this == &o) return *this;
  reset();
  driver_ = o.driver_;
  event_ = std::exchange(o.event_, nullptr);
  return *this;
}

Event::~Event() { reset(); }

void Event::reset() noexcept {
  if (event_) driver_->cuEventDestroy(std::exchange(event_, nullptr));
}

void Event::record(CUstream stream) const { MOEJIT_CU(*driver_, cuEventRecord(event_, stream)); }

float Event::since(const Event& start) const {
  MOEJIT_CU(*driver_, cuEventSynchronize(event_));
  float ms = 0;
  MOEJIT_CU(*driver_, cuEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

MappedHostBuffer::MappedHostBuffer(const Driver& driver, std::size_t bytes) : driver_(&driver) {
  MOEJIT_CU(driver, cuMemHostAlloc(&host_, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  std::memset(host_, 0, bytes);
  try {
    MOEJIT_CU(driver, cuMemHostGetDevicePointer(&device_, host_, 0));
  } catch (...) {
    reset();
    throw;
  }
}

MappedHostBuffer::MappedHostBuffer(MappedHostBuffer&& o) noexcept
    : driver_(o.driver_), host_(std::exchange(o.host_, nullptr)), device_(std::exchange(o.device_, 0)) {}

MappedHostBuffer& MappedHostBuffer::operator=(MappedHostBuffer&& o) noexcept {
  if (this == &o) return *this;
  reset();
  driver_ = o.driver_;
  host_ = std::exchange(o.host_, nullptr);
  device_ = std::exchange(o.device_, 0);
  return *this;
}

MappedHostBuffer::~MappedHostBuffer() { reset(); }

void MappedHostBuffer::reset() noexcept {
  if (host_) driver_->cuMemFreeHost(std::exchange(host_, nullptr));
  device_ = 0;
}

IpcMapping::IpcMapping(const Driver& driver, const CUipcMemHandle& handle, unsigned flags) : driver_(&driver) {
  MOEJIT_CU(driver, cuIpcOpenMemHandle(&ptr_, handle, flags));
}

IpcMapping::IpcMapping(IpcMapping&& o) noexcept : driver_(o.driver_), ptr_(std::exchange(o.ptr_, 0)) {}

IpcMapping& IpcMapping::operator=(IpcMapping&& o) noexcept {
  if (this == &o) return *this;
  reset();
  driver_ = o.driver_;
  ptr_ = std::exchange(o.ptr_, 0);
  return *this;
}

IpcMapping::~IpcMapping() { reset(); }

void IpcMapping::reset() noexcept {
  if (ptr_) driver_->cuIpcCloseMemHandle(std::exchange(ptr_, 0));
}

PrimaryContext::PrimaryContext(const Driver& driver, CUdevice device) : driver_(&driver), device_(device) {
  MOEJIT_CU(driver, cuDevicePrimaryCtxRetain(&context_, device));
}

PrimaryContext::PrimaryContext(PrimaryContext&& o) noexcept
    : driver_(o.driver_), device_(o.device_), context_(std::exchange(o.context_, nullptr)) {}

PrimaryContext& PrimaryContext::operator=(PrimaryContext&& o) noexcept {
  if (this == &o) return *this;
  reset();
  driver_ = o.driver_;
  device_ = o.device_;
  context_ = std::exchange(o.context_, nullptr);
  return *this;
}

PrimaryContext::~PrimaryContext() { reset(); }

void PrimaryContext::reset() noexcept {
  if (context_) driver_->cuDevicePrimaryCtxRelease(device_);
  context_ = nullptr;
}

Graph::Graph(const Driver& driver, const Stream& stream, const std::function<void()>& body) : driver_(driver) {
  MOEJIT_CU(driver_, cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  try {
    body();
  } catch (...) {
    CUgraph broken = nullptr;
    driver_.cuStreamEndCapture(stream.get(), &broken);
    if (broken) driver_.cuGraphDestroy(broken);
    throw;
  }
  MOEJIT_CU(driver_, cuStreamEndCapture(stream.get(), &graph_));
  try {
    MOEJIT_CU(driver_, cuGraphInstantiate(&exec_, graph_, 0));
  } catch (...) {
    // a constructor that throws runs no destructor: the captured graph is released here
    driver_.cuGraphDestroy(graph_);
    throw;
  }
}

Graph::~Graph() {
  if (exec_) driver_.cuGraphExecDestroy(exec_);
  if (graph_) driver_.cuGraphDestroy(graph_);
}

void Graph::launch(const Stream& stream) const { MOEJIT_CU(driver_, cuGraphLaunch(exec_, stream.get())); }

double time_per_call_us(const Driver& driver, const Stream& stream, int calls, int replays,
                        const std::function<void(int call)>& body) {
  Graph graph(driver, stream, [&] {
    for (int i = 0; i < calls; ++i) body(i);
  });
  Event start(driver), stop(driver);
  graph.launch(stream);  // warm: first replay uploads the graph
  stream.synchronize();
  std::vector<double> us;
  for (int r = 0; r < replays; ++r) {
    start.record(stream.get());
    graph.launch(stream);
    stop.record(stream.get());
    us.push_back(1000.0 * stop.since(start) / calls);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace moejit::detail
