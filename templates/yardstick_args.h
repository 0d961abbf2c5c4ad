#pragma once
// The yardstick kernels' argument, shared by the host (runtime/yardstick.cpp) and the template.

namespace moejit {

struct YardstickArgs {
  const void* src;            // 16-byte aligned
  void* dst;                  // copy: as large as src; read: never written (see the kernel)
  unsigned long long vectors; // 16-byte vectors in src
};

}  // namespace moejit
