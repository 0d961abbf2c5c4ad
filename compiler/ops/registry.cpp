#include "registry.hpp"

#include "activation.hpp"
#include "routing.hpp"

namespace moejit::detail {

std::span<const OpFamily> op_families() noexcept {
  static constexpr OpFamily kFamilies[] = {
      {"activation", &parse_activation},
      {"routing", &parse_routing},
  };
  return kFamilies;
}

}  // namespace moejit::detail
