#include "registry.hpp"

#include "activation.hpp"

namespace moejit::detail {

std::span<const OpFamily> op_families() noexcept {
  static constexpr OpFamily kFamilies[] = {
      {"activation", &parse_activation},
  };
  return kFamilies;
}

}  // namespace moejit::detail
