#include "registry.hpp"

#include <moejit/error.hpp>

#include "activation.hpp"
#include "experts.hpp"
#include "latent_tail.hpp"
#include "routing.hpp"

namespace moejit {

namespace detail {

std::span<const Family<ContractsOf>> compiler_families() noexcept {
  static constexpr Family<ContractsOf> kFamilies[] = {
      {"activation", &activation_contracts},
      {"routing", &routing_contracts},
      {"latent_tail", &latent_tail_contracts},
      {"experts", &experts_contracts},
  };
  return kFamilies;
}

}  // namespace detail

std::vector<Contract> contracts(const OpSpec& op, std::string_view arch) {
  const auto* family = detail::find_family(detail::compiler_families(), op.family());
  if (!family) {
    throw Error({.kind = ErrorKind::internal, .message = "no compiler for op family", .found = std::string(op.family())});
  }
  return family->entry(op, arch);
}

}  // namespace moejit
