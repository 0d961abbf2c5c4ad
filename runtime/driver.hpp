#pragma once
// The CUDA driver, loaded at run time: dlopen("libcuda.so.1") and cuGetProcAddress. Nothing
// links libcuda, so moejit builds and its CPU tests run where no driver exists; the first GPU
// call there fails with a clear error.

#include <cuda.h>

#include <string>

namespace moejit::detail {

// Every driver entry point moejit calls. NOTE: cuda.h maps some names to versioned symbols
// (cuMemAlloc -> cuMemAlloc_v2); decltype picks the prototype and cuGetProcAddress the matching
// version for CUDA_VERSION, so both stay in step.
// NOTE: the one exception to style.md's "no other macros": this X-macro list (and its two uses,
// here and in driver.cpp) derives a member's prototype and the symbol it resolves from one token,
// after cuda.h's macro expansion. A hand-written table of name strings beside the members could
// let the two drift apart -- the ABI trap tests/unit/test_driver_abi.cpp audits.
#define MOEJIT_DRIVER_FUNCTIONS(X)                                                          \
  X(cuInit) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet)       \
  X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize)     \
  X(cuCtxEnablePeerAccess)                                          \
  X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernel) X(cuKernelSetAttribute)      \
  X(cuLaunchKernelEx) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH)             \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)            \
  X(cuStreamWaitEvent) X(cuStreamBeginCapture) X(cuStreamEndCapture)  \
  X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy)             \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)              \
  X(cuEventDestroy) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle)      \
  X(cuIpcCloseMemHandle) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostGetDevicePointer)        \
  X(cuTensorMapEncodeTiled)

class Driver {
 public:
  /// dlopens libcuda.so.1 and resolves every entry point; throws moejit::Error (driver).
  Driver();
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

#define MOEJIT_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  MOEJIT_DRIVER_FUNCTIONS(MOEJIT_DRIVER_MEMBER)
#undef MOEJIT_DRIVER_MEMBER

  /// "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"
  std::string describe(CUresult result) const;

 private:
  void* handle_ = nullptr;
};

/// Raises moejit::Error (driver) naming the call and the error for a failed driver call.
void check_cu(const Driver& driver, CUresult result, const char* call);
#define MOEJIT_CU(driver, call) ::moejit::detail::check_cu((driver), (driver).call, #call)

}  // namespace moejit::detail
