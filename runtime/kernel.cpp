#include "kernel.hpp"

namespace moejit::detail {

Module::Module(const Driver& driver, std::string_view cubin) : driver_(driver) {
  MOEJIT_CU(driver_, cuLibraryLoadData(&library_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
}

Module::~Module() {
  if (library_) driver_.cuLibraryUnload(library_);
}

Kernel::Kernel(const Driver& driver, CUdevice device, std::shared_ptr<const Module> module, CompiledKernel info)
    : driver_(driver), device_(device), module_(std::move(module)), info_(std::move(info)) {
  MOEJIT_CU(driver_, cuLibraryGetKernel(&kernel_, module_->get(), info_.lowered_name.c_str()));
}

void Kernel::set_dynamic_shared(unsigned bytes) {
  shared_ = bytes;
  if (needs_shared_opt_in(shared_, info_.resources.shared_bytes)) {
    MOEJIT_CU(driver_, cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            static_cast<int>(shared_), kernel_, device_));
  }
}

void Kernel::prefer_l1() const {
  MOEJIT_CU(driver_, cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_SHAREDMEM_CARVEOUT_MAX_L1, kernel_, device_));
}

void Kernel::launch_raw(Dim3 grid, unsigned shared_bytes, void** params, CUstream stream, bool pdl) const {
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = grid.x;
  config.gridDimY = grid.y;
  config.gridDimZ = grid.z;
  config.blockDimX = block_.x;
  config.blockDimY = block_.y;
  config.blockDimZ = block_.z;
  config.sharedMemBytes = shared_bytes;
  config.hStream = stream;
  config.attrs = pdl ? &attr : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  // NOTE: a CUkernel passed as a CUfunction launches in the stream's context.
  MOEJIT_CU(driver_, cuLaunchKernelEx(&config, reinterpret_cast<CUfunction>(kernel_), params, nullptr));
}

}  // namespace moejit::detail
