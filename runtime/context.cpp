#include <moejit/context.hpp>
#include <moejit/error.hpp>
#include <moejit/op.hpp>

#include "cache/cache.hpp"
#include "compiler/nvrtc.hpp"
#include "driver.hpp"
#include "kernel.hpp"
#include "op_loader.hpp"

#include <fmt/format.h>

#include <mutex>
#include <unordered_map>

namespace moejit {

using detail::check_cu;

namespace {

DeviceInfo query_device(const detail::Driver& d, CUdevice dev, int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  MOEJIT_CU(d, cuDeviceGetName(name, sizeof name, dev));
  info.name = name;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    MOEJIT_CU(d, cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_shared_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.max_shared_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.hbm_peak_bytes_per_s = 2.0 * 1e3 * attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) *
                              (attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH) / 8.0);
  // NOTE: the arch-specific target ("a") unlocks Hopper/Blackwell-only instructions; a cubin
  // built for sm_90a runs on compute capability 9.0 only, which is what this device is.
  const int cc = info.cc_major * 10 + info.cc_minor;
  info.arch = fmt::format("sm_{}{}", cc, cc >= 90 ? "a" : "");
  if (!is_supported_arch(info.arch)) {
    throw Error({.kind = ErrorKind::driver, .message = "unsupported GPU", .found = fmt::format("{} ({})", info.name, info.arch),
                 .expected = "a Hopper or newer GPU (sm_90a, sm_100a, ...)"});
  }
  return info;
}

}  // namespace

struct Context::Impl {
  Options options;
  detail::Driver driver;
  CUdevice dev = 0;
  CUcontext primary = nullptr;
  DeviceInfo info;
  detail::Compiler compiler;
  detail::Cache cache;
  std::mutex mutex;
  std::unordered_map<detail::Key, std::shared_ptr<const detail::Module>, detail::KeyHash> modules;

  Impl(Options o, int ordinal) : options(std::move(o)), compiler(options.cuda_home), cache(options, compiler) {
    MOEJIT_CU(driver, cuInit(0));
    int count = 0;
    MOEJIT_CU(driver, cuDeviceGetCount(&count));
    if (ordinal < 0 || ordinal >= count) {
      throw Error({.kind = ErrorKind::usage, .message = "no such GPU", .found = std::to_string(ordinal),
                   .expected = fmt::format("a device ordinal below {}", count)});
    }
    MOEJIT_CU(driver, cuDeviceGet(&dev, ordinal));
    info = query_device(driver, dev, ordinal);
    MOEJIT_CU(driver, cuDevicePrimaryCtxRetain(&primary, dev));
    MOEJIT_CU(driver, cuCtxSetCurrent(primary));
  }
  ~Impl() {
    modules.clear();
    if (primary) driver.cuDevicePrimaryCtxRelease(dev);
  }
};

Context::Context(Options options, int device) : impl_(std::make_unique<Impl>(std::move(options), device)) {}
Context::~Context() = default;

const Options& Context::options() const noexcept { return impl_->options; }
const DeviceInfo& Context::device() const noexcept { return impl_->info; }
const detail::Driver& Context::driver() const noexcept { return impl_->driver; }
detail::Cache& Context::cache() noexcept { return impl_->cache; }

void Context::make_current() const { MOEJIT_CU(impl_->driver, cuCtxSetCurrent(impl_->primary)); }

std::shared_ptr<detail::Kernel> Context::kernel(const Contract& contract, std::string_view role) {
  const std::size_t index = contract.kernel_index(role);
  const auto entry = impl_->cache.get(contract).entry;
  const auto& key = entry->manifest.key;  // the contract's: checked when read, set when compiled
  std::shared_ptr<const detail::Module> module;
  {
    std::lock_guard lock(impl_->mutex);
    if (auto it = impl_->modules.find(key); it != impl_->modules.end()) module = it->second;
  }
  if (!module) {
    MOEJIT_CU(impl_->driver, cuCtxSetCurrent(impl_->primary));
    module = std::make_shared<detail::Module>(impl_->driver, entry->cubin);
    std::lock_guard lock(impl_->mutex);
    module = impl_->modules.emplace(key, module).first->second;
  }
  if (index >= entry->manifest.kernels.size()) {
    throw Error({.kind = ErrorKind::internal, .message = "cache entry has fewer kernels than its contract",
                 .found = std::to_string(entry->manifest.kernels.size()), .expected = std::to_string(index + 1)});
  }
  auto kernel = std::make_shared<detail::Kernel>(impl_->driver, impl_->dev, module, entry->manifest.kernels[index]);
  if (const int shared = contract.kernels[index].dynamic_shared; shared > 0) kernel->set_dynamic_shared(static_cast<unsigned>(shared));
  return kernel;
}

std::unique_ptr<Op> Context::load(std::shared_ptr<const OpSpec> op) {
  MOEJIT_CU(impl_->driver, cuCtxSetCurrent(impl_->primary));
  return detail::load_op(*this, std::move(op));
}

}  // namespace moejit
