#include "driver.hpp"

#include <moejit/error.hpp>

#include <fmt/format.h>

#include <string>
#include <string_view>

#include <dlfcn.h>

namespace moejit::detail {

namespace {

// The ABI version to ask for: CUDA_VERSION, except where the newest variant of a name is not
// the one cuda.h declares. NOTE: in CUDA 13, cuGetProcAddress("cuCtxSynchronize", 13000) returns
// cuCtxSynchronize(CUcontext) while cuda.h still declares cuCtxSynchronize(void); calling the
// one through the other passed a garbage context (a crash, or CONTEXT_IS_DESTROYED).
// tests/unit/test_driver_abi.cpp audits cudaTypedefs.h for every entry point moejit resolves.
int abi_version(std::string_view symbol) { return symbol == "cuCtxSynchronize" ? 2000 : CUDA_VERSION; }

// cuGetProcAddress takes base names: "cuMemAlloc_v2" -> "cuMemAlloc"; the version argument
// selects the variant.
std::string base_symbol(std::string_view expanded) {
  const auto v = expanded.rfind("_v");
  if (v != std::string_view::npos && v + 2 < expanded.size() &&
      expanded.find_first_not_of("0123456789", v + 2) == std::string_view::npos) {
    expanded = expanded.substr(0, v);
  }
  return std::string(expanded);
}

}  // namespace

Driver::Driver() {
  handle_ = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = ::dlerror();
    throw Error({.kind = ErrorKind::driver, .message = "no CUDA driver on this machine (a GPU op needs one)",
                 .call = "dlopen(libcuda.so.1)", .code = why ? why : "not found"});
  }
  using GetProc = decltype(&::cuGetProcAddress);
  auto get_proc = reinterpret_cast<GetProc>(::dlsym(handle_, "cuGetProcAddress_v2"));
  if (!get_proc) {
    ::dlclose(handle_);
    throw Error({.kind = ErrorKind::driver, .message = "the CUDA driver is too old (no cuGetProcAddress_v2)",
                 .call = "dlsym", .expected = "a driver for CUDA 12 or newer"});
  }
  auto resolve = [&](const char* expanded) {
    const std::string symbol = base_symbol(expanded);
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status{};
    if (get_proc(symbol.c_str(), &fn, abi_version(symbol), CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !fn) {
      ::dlclose(handle_);
      throw Error({.kind = ErrorKind::driver, .message = "the CUDA driver lacks an entry point", .call = "cuGetProcAddress",
                   .found = symbol, .expected = fmt::format("a driver supporting CUDA {}", CUDA_VERSION)});
    }
    return fn;
  };
  // NOTE: the name is stringified after macro expansion (cuGraphInstantiate is really
  // cuGraphInstantiateWithFlags, cuMemAlloc is cuMemAlloc_v2), so the symbol asked for is the
  // function whose prototype decltype picked.
#define MOEJIT_STRINGIFY_EXPANDED(x) MOEJIT_STRINGIFY(x)
#define MOEJIT_STRINGIFY(x) #x
#define MOEJIT_DRIVER_RESOLVE(name) name = reinterpret_cast<decltype(name)>(resolve(MOEJIT_STRINGIFY_EXPANDED(name)));
  MOEJIT_DRIVER_FUNCTIONS(MOEJIT_DRIVER_RESOLVE)
#undef MOEJIT_DRIVER_RESOLVE
#undef MOEJIT_STRINGIFY
#undef MOEJIT_STRINGIFY_EXPANDED
}

Driver::~Driver() {
  // NOTE: libcuda is never dlclosed: the driver keeps process-wide state that outlives us.
}

std::string Driver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(result, &name);
  if (cuGetErrorString) cuGetErrorString(result, &text);
  return fmt::format("{}{}{}", name ? name : fmt::format("CUresult {}", static_cast<int>(result)),
                     text ? ": " : "", text ? text : "");
}

void check_cu(const Driver& driver, CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  throw Error({.kind = ErrorKind::driver, .message = "CUDA driver call failed", .call = call,
               .code = driver.describe(result)});
}

}  // namespace moejit::detail
