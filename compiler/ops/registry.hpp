#pragma once
// The compiler's table of op families (spec/ops/registry.hpp says the shape).

#include <moejit/contract.hpp>

#include "spec/ops/registry.hpp"

#include <string_view>
#include <vector>

namespace moejit::detail {

using ContractsOf = std::vector<Contract> (*)(const OpSpec& op, std::string_view arch);

std::span<const Family<ContractsOf>> compiler_families() noexcept;

}  // namespace moejit::detail
