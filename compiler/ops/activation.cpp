#include "activation.hpp"

#include "compiler/codegen.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace moejit::detail {

int activation_vec(const ActivationSpec& s) noexcept {
  const int max_vec = static_cast<int>(16 / std::max(size_of(s.dtype), size_of(s.out_dtype)));
  int v = 1;
  while (v < max_vec && s.d % (2 * v) == 0) v *= 2;
  return v;
}

bool act_by_tables(const ActivationSpec& s) noexcept {
  return (s.kind == ActivationKind::situ || s.kind == ActivationKind::gelu) && s.dtype == DType::bf16 && !s.interleaved;
}

unsigned act_table_bytes(const ActivationSpec& s) noexcept {
  const bool up = s.kind == ActivationKind::situ && s.linear_beta > 0;
  return (up ? 2u : 1u) * 2 * 4096 * 4;
}

void add_activation_constants(StubBuilder& stub, const ActivationParams& p) {
  stub.constant("moejit::ActKind", "kKind", fmt::format("moejit::ActKind::{}", to_string(p.kind)))
      .flag("kInterleaved", p.interleaved)
      .real("kBeta", p.beta)
      .real("kInvBeta", p.beta > 0 ? 1.0f / p.beta : 0.0f)
      .real("kLinearBeta", p.linear_beta)
      .real("kInvLinearBeta", p.linear_beta > 0 ? 1.0f / p.linear_beta : 0.0f)
      .real("kAlpha", p.alpha)
      .real("kLimit", p.limit);
}

std::vector<Contract> activation_contracts(const OpSpec& op, std::string_view arch) {
  const auto& s = dynamic_cast<const ActivationSpec&>(op);
  Contract c("activation", std::string(arch), "activation.cuh");
  const bool masked = s.layout == ActivationLayout::masked;
  const int vec = activation_vec(s);
  c.set("kind", std::string(to_string(s.kind)))
      .set("layout", std::string(to_string(s.layout)))
      .set("d", std::to_string(s.d))
      .set("num_experts", std::to_string(masked ? s.num_experts : 0))
      .set("dtype", std::string(spec_name(s.dtype)))
      .set("out_dtype", std::string(spec_name(s.out_dtype)))
      .set("interleaved", s.interleaved ? "true" : "false");
  if (s.kind == ActivationKind::situ) {
    c.set("beta", canonical_float(s.beta)).set("linear_beta", canonical_float(s.linear_beta));
  }
  if (s.kind == ActivationKind::swiglu_oai) {
    c.set("alpha", canonical_float(s.alpha)).set("limit", canonical_float(s.limit));
  }
  c.set("threads", std::to_string(kActivationThreads))
      .set("vec", std::to_string(vec))
      .set("unroll", std::to_string(kActivationUnroll));

  StubBuilder stub("activation.cuh");
  add_activation_constants(stub, s);
  stub.flag("kMasked", masked)
      .integer("kD", s.d)
      .integer("kNumExperts", masked ? s.num_experts : 0)
      .constant("int", "kThreads", std::to_string(kActivationThreads))
      .constant("int", "kVec", std::to_string(vec))
      .constant("int", "kUnroll", std::to_string(kActivationUnroll))
      .type("In", s.dtype)
      .type("Out", s.out_dtype);
  // 32-bit element offsets where a call's offsets fit (fewer registers), 64-bit beyond.
  std::vector<StubBuilder::Kernel> kernels = {{std::string(kActivationNarrow), "moejit::activation_kernel", "moejit::ActivationArgs"},
                                              {std::string(kActivationWide), "moejit::activation_wide_kernel", "moejit::ActivationArgs"}};
  if (act_by_tables(s)) {
    kernels.push_back({std::string(kActTableInit), "moejit::act_table_init_kernel", "moejit::ActivationArgs"});
    kernels.push_back({std::string(kActTable), "moejit::act_table_kernel", "moejit::ActivationArgs", static_cast<int>(act_table_bytes(s))});
  }
  stub.emit(c, kernels);
  return {c};
}

}  // namespace moejit::detail
