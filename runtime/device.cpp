#include "device.hpp"

#include <moejit/error.hpp>

#include <algorithm>
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

void DeviceBuffer::upload(const void* host, std::size_t bytes) const {
  if (bytes) MOEJIT_CU(*driver_, cuMemcpyHtoD(ptr_, host, bytes));
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes) MOEJIT_CU(*driver_, cuMemcpyDtoH(host, ptr_, bytes));
}

Stream::Stream(const Driver& driver) : driver_(driver) {
  MOEJIT_CU(driver_, cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
}

Stream::~Stream() {
  if (stream_) driver_.cuStreamDestroy(stream_);
}

void Stream::synchronize() const { MOEJIT_CU(driver_, cuStreamSynchronize(stream_)); }

Event::Event(const Driver& driver) : driver_(driver) { MOEJIT_CU(driver_, cuEventCreate(&event_, CU_EVENT_DEFAULT)); }

Event::~Event() {
  if (event_) driver_.cuEventDestroy(event_);
}

void Event::record(CUstream stream) const { MOEJIT_CU(driver_, cuEventRecord(event_, stream)); }

float Event::since(const Event& start) const {
  MOEJIT_CU(driver_, cuEventSynchronize(event_));
  float ms = 0;
  MOEJIT_CU(driver_, cuEventElapsedTime(&ms, start.event_, event_));
  return ms;
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
  MOEJIT_CU(driver_, cuGraphInstantiate(&exec_, graph_, 0));
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
