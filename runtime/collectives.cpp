#include <moejit/collectives.hpp>
#include <moejit/context.hpp>
#include <moejit/error.hpp>

#include <fmt/format.h>

#include <utility>

namespace moejit {

namespace detail {

void check_nccl(ncclResult_t result, const char* call, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  throw Error({.kind = ErrorKind::nccl, .message = "NCCL call failed", .call = call,
               .code = fmt::format("{}{}{}", ncclGetErrorString(result), last && *last ? ": " : "", last ? last : "")});
}

}  // namespace detail

Communicator Communicator::adopt(ncclComm_t comm) {
  if (!comm) throw Error({.kind = ErrorKind::usage, .message = "cannot adopt a null communicator"});
  return Communicator(comm, false);
}

ncclUniqueId Communicator::unique_id() {
  ncclUniqueId id;
  MOEJIT_NCCL(ncclGetUniqueId(&id));
  return id;
}

Communicator Communicator::create(Context& context, const ncclUniqueId& id, int nranks, int rank) {
  context.make_current();
  ncclComm_t comm = nullptr;
  MOEJIT_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
  return Communicator(comm, true);
}

std::vector<Communicator> Communicator::create_all(std::span<Context* const> contexts) {
  std::vector<int> devices;
  for (auto* c : contexts) devices.push_back(c->device().ordinal);
  std::vector<ncclComm_t> comms(devices.size());
  MOEJIT_NCCL(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  std::vector<Communicator> out;
  for (auto c : comms) out.push_back(Communicator(c, true));
  return out;
}

Communicator::Communicator(Communicator&& o) noexcept
    : comm_(std::exchange(o.comm_, nullptr)), owned_(o.owned_), aborted_(o.aborted_) {}

Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    this->~Communicator();
    comm_ = std::exchange(o.comm_, nullptr);
    owned_ = o.owned_;
    aborted_ = o.aborted_;
  }
  return *this;
}

Communicator::~Communicator() {
  if (!comm_ || !owned_) return;
  if (aborted_) return;  // ncclCommAbort already freed it
  ncclCommDestroy(comm_);
}

int Communicator::rank() const {
  int r = 0;
  detail::check_nccl(ncclCommUserRank(comm_, &r), "ncclCommUserRank", comm_);
  return r;
}

int Communicator::size() const {
  int n = 0;
  detail::check_nccl(ncclCommCount(comm_, &n), "ncclCommCount", comm_);
  return n;
}

int Communicator::device() const {
  int d = 0;
  detail::check_nccl(ncclCommCuDevice(comm_, &d), "ncclCommCuDevice", comm_);
  return d;
}

void Communicator::check() {
  if (aborted_) throw Error({.kind = ErrorKind::nccl, .message = "the communicator was aborted after an error"});
  ncclResult_t async = ncclSuccess;
  detail::check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", comm_);
  if (async == ncclSuccess || async == ncclInProgress) return;
  const std::string last = ncclGetLastError(comm_) ? ncclGetLastError(comm_) : "";
  abort();
  throw Error({.kind = ErrorKind::nccl, .message = "asynchronous NCCL error; the communicator was aborted",
               .code = fmt::format("{}{}{}", ncclGetErrorString(async), last.empty() ? "" : ": ", last)});
}

void Communicator::abort() noexcept {
  if (!comm_ || aborted_) return;
  if (owned_) ncclCommAbort(comm_);
  aborted_ = true;
}

}  // namespace moejit
