#include "experts.hpp"

#include "activation.hpp"
#include "compiler/codegen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace moejit::detail {

namespace {

// Warps splitting a GEMM's K (k elements, `warps_at_one_token` row-group warps when a call of
// one token touches topk experts): two while every warp keeps at least 16 blocks of 32 (its
// pipeline stays full), and more while a one-token call would keep fewer than kDecodeWarps
// warps streaming (24 an SM of an H200: enough loads in flight to saturate HBM), as long as each
// keeps 24 blocks. Measured on the H200: Kimi-K3 tp 8's GEMM1 (K 3584) split 4 ways, 28 blocks a
// warp, is 6-16% faster at T 1-64; Qwen3-30B-A3B's (K 2048, 16 blocks) 15-24% slower at T >= 8.
constexpr std::int64_t kDecodeWarps = 3072;
int k_splits(std::int64_t k, std::int64_t warps_at_one_token) {
  const std::int64_t blocks = k / 32;
  int split = blocks % 2 == 0 && blocks / 2 >= 16 ? 2 : 1;
  for (int s = split; s <= 4; ++s) {
    if (blocks % s != 0 || (s > split && blocks / s < 24)) continue;
    split = s;
    if (warps_at_one_token * s >= kDecodeWarps) break;
  }
  return split;
}
}  // namespace

ExpertsTiling experts_tiling(const ExpertsSpec& s) noexcept {
  ExpertsTiling t;
  const std::int64_t experts_at_one_token = s.masked() ? s.num_experts : std::min<std::int64_t>(s.topk, s.num_experts);
  t.split1 = k_splits(s.hidden, experts_at_one_token * s.intermediate / 8);
  t.split2 = k_splits(s.intermediate, experts_at_one_token * s.hidden / 16);
  // At most 256 threads a CTA: more K-split warps take fewer row groups.
  t.groups1 = t.split1 > 2 ? 2 : 4;
  t.groups2 = t.split2 > 2 ? 2 : 4;
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
