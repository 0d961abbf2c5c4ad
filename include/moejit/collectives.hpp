#pragma once
/// NCCL communicators for ops that span GPUs. moejit never uses NVLink multicast: on machines
/// where it is disallowed, set NCCL_NVLS_ENABLE=0 before the first communicator is created.

#include <nccl.h>

#include <span>
#include <vector>

namespace moejit {

class Context;

class Communicator {
 public:
  /// Wraps an engine's communicator; moejit never destroys it.
  static Communicator adopt(ncclComm_t comm);
  /// One process per GPU: every rank calls this with the same id (unique_id() on one rank,
  /// passed to the others by the caller), on the context of its own GPU.
  static Communicator create(Context& context, const ncclUniqueId& id, int nranks, int rank);
  /// One process driving several GPUs: rank i on contexts[i] (ncclCommInitAll).
  static std::vector<Communicator> create_all(std::span<Context* const> contexts);
  static ncclUniqueId unique_id();

  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();

  ncclComm_t get() const noexcept { return comm_; }
  int rank() const;
  int size() const;
  /// The CUDA device ordinal the communicator was created on.
  int device() const;
  /// Throws moejit::Error (nccl) if an asynchronous NCCL error occurred, after aborting the
  /// communicator (an errored communicator cannot be used again).
  void check();
  /// Aborts the communicator: pending operations stop, every later use fails.
  void abort() noexcept;

 private:
  Communicator(ncclComm_t comm, bool owned) noexcept : comm_(comm), owned_(owned) {}
  ncclComm_t comm_ = nullptr;
  bool owned_ = false;
  bool aborted_ = false;
};

namespace detail {
/// Raises moejit::Error (nccl) for a failed NCCL call.
void check_nccl(ncclResult_t result, const char* call, ncclComm_t comm = nullptr);
}  // namespace detail
#define MOEJIT_NCCL(call) ::moejit::detail::check_nccl((call), #call)

}  // namespace moejit
