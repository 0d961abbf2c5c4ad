#pragma once
// A compiled kernel loaded on a device: it owns its module (CUlibrary, shared by the kernels of
// one contract) and knows its own launch geometry and resources.

#include "compiler/nvrtc.hpp"
#include "driver.hpp"

#include <memory>
#include <string>

namespace moejit::detail {

/// A loaded CUlibrary, unloaded on destruction.
class Module {
 public:
  Module(const Driver& driver, std::string_view cubin);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  CUlibrary get() const noexcept { return library_; }

 private:
  const Driver& driver_;
  CUlibrary library_ = nullptr;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// Whether a launch with `dynamic` bytes of dynamic shared memory needs the kernel's opt-in
/// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES): without it the driver allows 48 KiB less the
/// kernel's static shared memory.
constexpr bool needs_shared_opt_in(unsigned dynamic, int static_bytes) noexcept {
  return dynamic > 0 && static_cast<long long>(dynamic) + static_bytes > 48 * 1024;
}

class Kernel {
 public:
  Kernel(const Driver& driver, CUdevice device, std::shared_ptr<const Module> module, CompiledKernel info);

  /// Block size, fixed by the contract (set by the op at load).
  void set_block(Dim3 block) noexcept { block_ = block; }
  /// Dynamic shared memory a launch takes: the contract's (Context::kernel sets it), or what the
  /// op sizes at load where the contract leaves it to the device (Contract::kSharedAtLoad).
  void set_dynamic_shared(unsigned bytes);
  /// Asks for the smallest shared-memory carveout (the most L1) for this kernel's launches.
  void prefer_l1() const;
  Dim3 block() const noexcept { return block_; }
  unsigned dynamic_shared_bytes() const noexcept { return shared_; }
  const CompiledKernel& info() const noexcept { return info_; }

  /// Launches with `args` (one struct, passed by value) on `stream`. With `pdl`, the launch may
  /// start while the previous kernel in the stream finishes (programmatic dependent launch).
  template <class Args>
  void launch(Dim3 grid, const Args& args, CUstream stream, bool pdl = false) const {
    void* params[] = {const_cast<Args*>(&args)};
    launch_raw(grid, shared_, params, stream, pdl);
  }
  void launch_raw(Dim3 grid, unsigned shared_bytes, void** params, CUstream stream, bool pdl) const;

 private:
  const Driver& driver_;
  CUdevice device_;
  std::shared_ptr<const Module> module_;
  CUkernel kernel_ = nullptr;
  CompiledKernel info_;
  Dim3 block_;
  unsigned shared_ = 0;
};

}  // namespace moejit::detail
