#pragma once
// The activation op's contract (templates/activation.cuh) and its tile choice.

#include <moejit/contract.hpp>

#include "spec/ops/activation.hpp"

#include <string_view>
#include <vector>

namespace moejit::detail {

/// Threads per block. One chunk of `activation_vec` elements per thread: these kernels are
/// latency- and issue-bound, so resident warps beat per-thread unrolling (1.2-1.6x at large T).
inline constexpr int kActivationThreads = 256;
inline constexpr int kActivationUnroll = 1;
/// Elements per vector: the widest power of two dividing d whose input and output vectors fit
/// in 16 bytes.
int activation_vec(const ActivationSpec& s) noexcept;

std::vector<Contract> activation_contracts(const OpSpec& op, std::string_view arch);

}  // namespace moejit::detail
