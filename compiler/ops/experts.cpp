#include "experts.hpp"

#include "activation.hpp"
#include "compiler/codegen.hpp"

#include <fmt/format.h>

namespace moejit::detail {

namespace {

// Warps splitting a GEMM's K so that a small call still keeps enough weight loads in flight:
// two while every warp keeps at least 16 blocks of 32 (its pipeline stays full), else one.
int k_splits(int k) { return (k / 32) % 2 == 0 && k / 32 / 2 >= 16 ? 2 : 1; }

}  // namespace

ExpertsTiling experts_tiling(const ExpertsSpec& s) noexcept {
  ExpertsTiling t;
  t.split1 = k_splits(s.hidden);
  t.split2 = k_splits(s.intermediate);
  return t;
}

std::vector<Contract> experts_contracts(const OpSpec& op, std::string_view arch) {
  const auto& s = dynamic_cast<const ExpertsSpec&>(op);
  const auto t = experts_tiling(s);
  const auto& act = s.activation;
  Contract c("experts", std::string(arch), "experts.cuh");
  c.set("hidden", std::to_string(s.hidden))
      .set("intermediate", std::to_string(s.intermediate))
      .set("num_experts", std::to_string(s.num_experts))
      .set("topk", std::to_string(s.topk))
      .set("id_range", std::to_string(s.id_range()))
      .set("layout", std::string(to_string(s.layout)))
      .set("expert_map", s.global_experts > 0 ? "true" : "false")
      .set("weight_on_input", s.weight_on_input ? "true" : "false")
      .set("bias", s.bias ? "true" : "false")
      .set("dtype", std::string(spec_name(s.dtype)))
      .set("ids_dtype", std::string(spec_name(s.ids_dtype)))
      .set("activation", std::string(to_string(act.kind)))
      .set("interleaved", act.interleaved ? "true" : "false");
  if (act.kind == ActivationKind::situ) c.set("beta", canonical_float(act.beta)).set("linear_beta", canonical_float(act.linear_beta));
  if (act.kind == ActivationKind::swiglu_oai) c.set("alpha", canonical_float(act.alpha)).set("limit", canonical_float(act.limit));
  c.set("groups1", std::to_string(t.groups1))
      .set("split1", std::to_string(t.split1))
      .set("groups2", std::to_string(t.groups2))
      .set("split2", std::to_string(t.split2));

  StubBuilder stub("experts.cuh");
  stub.integer("kH", s.hidden)
      .integer("kI", s.intermediate)
      .integer("kE", s.num_experts)
      .integer("kK", s.topk)
      .integer("kIdRange", s.id_range())
      .flag("kMasked", s.masked())
      .flag("kHasMap", s.global_experts > 0)
      .flag("kWeightOnInput", s.weight_on_input)
      .flag("kBias", s.bias)
      .flag("kIds64", s.ids_dtype == DType::i64)
      .type("T", s.dtype)
      .type("Out", s.dtype)
      .constant("int", "kGroups1", std::to_string(t.groups1))
      .constant("int", "kSplit1", std::to_string(t.split1))
      .constant("int", "kGroups2", std::to_string(t.groups2))
      .constant("int", "kSplit2", std::to_string(t.split2));
  add_activation_constants(stub, act);
  constexpr std::string_view kGemmArgs = "moejit::ExpertsGemmArgs";
  std::vector<StubBuilder::Kernel> kernels = {
      {std::string(kExpertsMeta), "moejit::experts_meta_kernel", "moejit::ExpertsMetaArgs"},
      {std::string(kExpertsGemm1Small), fmt::format("moejit::experts_gemm1_kernel<{}>", kExpertsSmallTile / 8), std::string(kGemmArgs)},
      {std::string(kExpertsGemm1Large), fmt::format("moejit::experts_gemm1_kernel<{}>", kExpertsLargeTile / 8), std::string(kGemmArgs)},
      {std::string(kExpertsGemm2Small), fmt::format("moejit::experts_gemm2_kernel<{}>", kExpertsSmallTile / 8), std::string(kGemmArgs)},
      {std::string(kExpertsGemm2Large), fmt::format("moejit::experts_gemm2_kernel<{}>", kExpertsLargeTile / 8), std::string(kGemmArgs)}};
  if (!s.masked()) kernels.push_back({std::string(kExpertsCombine), "moejit::experts_combine_kernel", "moejit::ExpertsCombineArgs"});
  stub.emit(c, kernels);
  return {c};
}

}  // namespace moejit::detail
