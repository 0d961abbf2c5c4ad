// Main of the [gpu] tests: where no driver or GPU exists they skip with a visible message and
// exit code 77, which CTest reports as "Skipped".
#define CATCH_CONFIG_RUNNER
#include <moejit/error.hpp>

#include "gpu_common.hpp"
#include "runtime/driver.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdio>

#include <execinfo.h>
#include <cstdlib>

namespace {
// A crash prints its stack (test_gpu links with -rdynamic, so the names are there).
void on_crash(int sig) {
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  std::fprintf(stderr, "test_gpu: signal %d, stack:\n", sig);
  ::backtrace_symbols_fd(frames, n, 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGSEGV, on_crash);
  std::signal(SIGABRT, on_crash);
  // NOTE: never NVLink multicast (NVLS): these machines' GPUs are shared.
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  ::setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
  try {
    moejit::detail::Driver driver;
    int count = 0;
    if (driver.cuInit(0) != CUDA_SUCCESS || driver.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
      std::printf("SKIPPED: no CUDA device here; the [gpu] tests run on an H200 (see bench/README.md)\n");
      return 77;
    }
  } catch (const moejit::Error& e) {
    std::printf("SKIPPED: %s; the [gpu] tests run on an H200 (see bench/README.md)\n", e.what());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
