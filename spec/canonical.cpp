#include "canonical.hpp"

#include <fmt/format.h>

namespace moejit::detail {

std::string canonical_float(float x) { return fmt::format("{}", x); }

double canonical_number(float x) { return std::stod(canonical_float(x)); }

}  // namespace moejit::detail
