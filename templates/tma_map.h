#pragma once
// A CUtensorMap (TMA descriptor) as kernel arguments carry it: encoded on the host
// (cuTensorMapEncodeTiled, runtime/tma.hpp), read by cp.async.bulk.tensor. Plain data only.

namespace moejit {

struct alignas(64) TmaMap {
  unsigned long long opaque[16];
};

}  // namespace moejit
