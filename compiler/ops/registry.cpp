#include "registry.hpp"

#include "activation.hpp"
#include "latent_tail.hpp"
#include "routing.hpp"

namespace moejit::detail {

std::span<const OpFamily> op_families() noexcept {
  static constexpr OpFamily kFamilies[] = {
      {"activation", &parse_activation},
      {"routing", &parse_routing},
      {"latent_tail", &parse_latent_tail},
  };
  return kFamilies;
}

}  // namespace moejit::detail
