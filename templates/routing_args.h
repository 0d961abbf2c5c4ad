#pragma once
// The routing kernels' argument, shared by the host launcher (runtime/) and the template.

namespace moejit {

struct RoutingArgs {
  const void* logits;  // [T, E], Config::Logit
  const void* bias;    // [E], Config::Bias; null when the contract has no bias
  float* weights;      // [T, K]
  void* ids;           // [T, K], int or long long
  long long tokens;    // T
};

}  // namespace moejit
