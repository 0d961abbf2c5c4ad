#include "latent_tail.hpp"

#include "compiler/codegen.hpp"

namespace moejit::detail {

std::vector<Contract> latent_tail_contracts(const OpSpec& op, std::string_view arch) {
  const auto& s = dynamic_cast<const LatentTailSpec&>(op);
  Contract c("latent_tail", std::string(arch), "latent_tail.cuh");
  const bool multi = s.tp_size > 1;
  c.set("tp_size", std::to_string(s.tp_size))
      .set("hidden", std::to_string(s.hidden))
      .set("latent", std::to_string(s.latent))
      .set("eps", canonical_float(s.eps))
      .set("shared_expert", s.shared_expert ? "true" : "false")
      .set("slot_tokens", std::to_string(s.slot_tokens()))
      .set("k_block", std::to_string(s.k_block()))
      .set("splits", std::to_string(s.splits()))
      .set("kernels", multi ? "norm,upproj,exchange,gather,permute" : "norm,upproj");
  StubBuilder stub("latent_tail.cuh");
  stub.constant("int", "kH", std::to_string(s.hidden))
      .constant("int", "kL", std::to_string(s.latent))
      .constant("int", "kTP", std::to_string(s.tp_size))
      .flag("kShared", s.shared_expert)
      .real("kEps", s.eps)
      .constant("int", "kSlotTokens", std::to_string(s.slot_tokens()))
      .constant("int", "kKBlock", std::to_string(s.k_block()))
      .constant("int", "kSplits", std::to_string(s.splits()));
  std::vector<StubBuilder::Kernel> kernels = {
      {std::string(kTailNorm), "moejit::tail_norm_kernel", "moejit::TailNormArgs"},
      {std::string(kTailUpProj), "moejit::tail_upproj_kernel", "moejit::TailUpArgs"}};
  if (multi) {
    kernels.push_back({std::string(kTailExchange), "moejit::tail_exchange_kernel", "moejit::TailNormArgs"});
    kernels.push_back({std::string(kTailGather), "moejit::tail_gather_kernel", "moejit::TailGatherArgs"});
    kernels.push_back({std::string(kTailPermute), "moejit::tail_permute_kernel", "moejit::TailPermuteArgs"});
  }
  stub.emit(c, kernels);
  return {c};
}

}  // namespace moejit::detail
