#pragma once
// The activation op's contract (templates/activation.cuh) and its tile choice.

#include <moejit/contract.hpp>

#include "compiler/codegen.hpp"
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

/// Kernel roles: 32-bit and 64-bit element offsets; the activation by tables (their fill, run at
/// load, and the kernel) where act_by_tables() holds (templates/activation_table.cuh).
inline constexpr std::string_view kActivationNarrow = "narrow";
inline constexpr std::string_view kActivationWide = "wide";
inline constexpr std::string_view kActTableInit = "table_init";
inline constexpr std::string_view kActTable = "table";
/// SituGLU and erf gelu of bf16 input, gate and up halves: their factors are tables of 16 bits.
bool act_by_tables(const ActivationSpec& s) noexcept;
/// Bytes of its tables (templates/activation_table.cuh, act_table_bytes): 32 KB a factor.
unsigned act_table_bytes(const ActivationSpec& s) noexcept;

/// The activation's constants of a stub (templates/activation.cuh's Config: kKind, kInterleaved,
/// kBeta, kInvBeta, kLinearBeta, kInvLinearBeta, kAlpha, kLimit): the activation op's and the
/// experts op's GEMM1 epilogue's.
void add_activation_constants(StubBuilder& stub, const ActivationParams& p);

std::vector<Contract> activation_contracts(const OpSpec& op, std::string_view arch);

}  // namespace moejit::detail
