#pragma once
/// A Context owns everything moejit keeps for one GPU: the options, the device's properties,
/// the compiler and the cache, and the modules loaded from it. No moejit state is global.

#include <moejit/contract.hpp>
#include <moejit/options.hpp>
#include <moejit/spec.hpp>

#include <memory>
#include <string>

namespace moejit {

namespace detail {
class Cache;
class Compiler;
class Driver;
class Kernel;
}  // namespace detail

class Op;

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  std::string arch;  ///< the NVRTC target: "sm_90a" on H100/H200, "sm_100a" on B200
  int sm_count = 0;
  int max_shared_per_block = 0;  ///< opt-in maximum, bytes
  int max_shared_per_sm = 0;     ///< bytes an SM has for its resident CTAs
  int l2_bytes = 0;
  /// DRAM bandwidth by the data sheet's arithmetic: memory clock x 2 (double data rate) x bus
  /// width. The yardsticks measure what kernels actually reach.
  double hbm_peak_bytes_per_s = 0;
};

class Context {
 public:
  /// Opens `device`. This is moejit's first GPU call: without a driver or GPU it throws
  /// moejit::Error (kind driver) saying so. Makes the device's primary context current.
  explicit Context(Options options = Options::from_environment(), int device = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Options& options() const noexcept;
  const DeviceInfo& device() const noexcept;

  /// Gets the op's kernels (memory, disk cache or NVRTC) and loads them on this device.
  std::unique_ptr<Op> load(std::shared_ptr<const OpSpec> op);
  /// The kernel of a contract with this role (Contract::Kernel), loaded on this device (the
  /// module is shared per contract), with the contract's dynamic shared memory set.
  std::shared_ptr<detail::Kernel> kernel(const Contract& contract, std::string_view role);

  /// Makes this device's primary context current on the calling thread (allocations and
  /// other context-bound driver calls of the thread then go to this device).
  void make_current() const;

  const detail::Driver& driver() const noexcept;
  detail::Cache& cache() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moejit
