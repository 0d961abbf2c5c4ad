#pragma once
// The NVRTC driver: compiles a contract's generated stub (with the embedded templates as
// headers) to a cubin or PTX for its exact arch, finds kernels through name expressions, and
// parses ptxas's resource report. Thread-safe: warmup compiles on a thread pool.

#include <moejit/contract.hpp>

#include "key.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace moejit::detail {

/// What ptxas reported for one kernel.
struct KernelResources {
  int registers = 0;
  int shared_bytes = 0;       ///< static shared memory
  int stack_bytes = 0;        ///< local memory: stack frame
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int barriers = 0;
  bool wgmma_serialized = false;  ///< ptxas's C7518: it could not keep the kernel's wgmmas in flight
  bool operator==(const KernelResources&) const = default;
};

struct CompiledKernel {
  std::string name_expression;  ///< "moejit::activation_kernel<moejit_generated::Config>"
  std::string lowered_name;     ///< the mangled symbol in the cubin
  KernelResources resources;
};

enum class Emit { cubin, ptx };

struct CompileOutput {
  std::string binary;  ///< cubin bytes, or PTX text
  std::vector<CompiledKernel> kernels;
  std::string log;
  double seconds = 0;
};

/// One `-MOEJIT_..._CHECK` target: raises moejit::Error (kind nvrtc) for a failed NVRTC call.
void check_nvrtc(int result, const char* call);
#define MOEJIT_NVRTC_CHECK(call) ::moejit::detail::check_nvrtc(static_cast<int>(call), #call)

class Compiler {
 public:
  explicit Compiler(std::filesystem::path cuda_home);

  const Toolchain& toolchain() const noexcept { return toolchain_; }
  CompileOutput compile(const Contract& contract, Emit emit = Emit::cubin) const;
  /// The full option list for an arch (include paths and all), as given to NVRTC.
  std::vector<std::string> options(std::string_view arch, Emit emit) const;

 private:
  std::vector<std::string> include_options() const;

  std::filesystem::path cuda_home_;
  Toolchain toolchain_;
};

/// Parses `--ptxas-options=-v` output into per-kernel resources, keyed by mangled name.
std::vector<std::pair<std::string, KernelResources>> parse_ptxas_report(std::string_view log);

}  // namespace moejit::detail
