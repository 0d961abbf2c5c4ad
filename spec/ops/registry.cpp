#include "registry.hpp"

#include "activation.hpp"
#include "experts.hpp"
#include "latent_tail.hpp"
#include "routing.hpp"

namespace moejit::detail {

std::span<const Family<ParseOp>> spec_families() noexcept {
  static constexpr Family<ParseOp> kFamilies[] = {
      {"activation", &parse_activation},
      {"routing", &parse_routing},
      {"latent_tail", &parse_latent_tail},
      {"experts", &parse_experts},
  };
  return kFamilies;
}

}  // namespace moejit::detail
